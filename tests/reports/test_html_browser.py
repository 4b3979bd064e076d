"""The HTML report in a real headless browser (Debian's chromium + chromium-driver, through selenium).

Checks what a person would: the page loads with no console error, clicking a column header sorts
the node table, the filter box keeps matching rows, and the roofline has one point per node whose
hover shows that node. Skipped, saying why, where no browser or driver is installed
(``apt-get install -y chromium chromium-driver``; ``make test`` installs them when run as root).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from paths import ROOT

from solar_io import bound, load
from solar_io.backends.roofline.report import document
from solar_io.reports.html import sol_report_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (the dev extra has it)")
pytestmark = pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                                reason="no chromium/chromedriver: apt-get install -y chromium chromium-driver")


@pytest.fixture(scope="module")
def browser():  # noqa: ANN201
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    drv.set_page_load_timeout(60)
    yield drv
    drv.quit()


def test_report_page_in_chromium(browser, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    g = load(ROOT / "examples/graphs/attention.yaml")
    r = bound(g, "h100-sxm", measured="1ms")
    page = tmp_path / "report.html"
    page.write_text(sol_report_html(document([r])))
    browser.get(page.as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, errors

    points = browser.find_elements(By.CSS_SELECTOR, "svg.roofline circle")
    assert len(points) == len(g.nodes)

    table = browser.find_element(By.ID, "nodes-0")
    headers = table.find_elements(By.CSS_SELECTOR, "thead th")
    sol_col = [h.text for h in headers].index("SOL")

    def column(i: int) -> list[float]:
        rows = table.find_elements(By.CSS_SELECTOR, "tbody tr")
        return [float(row.find_elements(By.TAG_NAME, "td")[i].get_attribute("data-v")) for row in rows]

    headers[sol_col].click()
    asc = column(sol_col)
    assert asc == sorted(asc) and headers[sol_col].get_attribute("aria-sort") == "ascending"
    headers[sol_col].click()
    assert column(sol_col) == sorted(asc, reverse=True)
    name_col = [h.text for h in headers].index("node")
    headers[name_col].click()
    names = [row.find_elements(By.TAG_NAME, "td")[name_col].text
             for row in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert names == sorted(names, key=str.lower)

    box = browser.find_element(By.CSS_SELECTOR, 'input[data-filter-for="nodes-0"]')
    target = g.nodes[0].name
    box.send_keys(target)
    shown = [row for row in table.find_elements(By.CSS_SELECTOR, "tbody tr") if row.is_displayed()]
    assert shown and all(target in row.text for row in shown)
    assert f"of {len(g.nodes)} rows" in browser.find_element(By.CSS_SELECTOR, '[data-count-for="nodes-0"]').text

    where = [(p.get_attribute("cx"), p.get_attribute("cy")) for p in points]
    alone = next(p for p, xy in zip(points, where, strict=True) if where.count(xy) == 1)  # no point on top of it
    ActionChains(browser).move_to_element(alone).perform()
    tip = browser.find_element(By.ID, "tip")
    assert tip.is_displayed() and tip.text.startswith(alone.get_attribute("data-name") + " (")
    assert not [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
