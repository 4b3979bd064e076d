# Debian's Chromium and ChromeDriver for the HTML report's browser test (tests/reports/test_html_browser.py).
# Installed once where this runs as root with apt-get; anywhere else the test is skipped and says why.
# By hand: apt-get install -y chromium chromium-driver (and graphviz for `solar-io graph` pictures).
.PHONY: browser
browser: jail  # one apt-get at a time (make -j)
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium, chromium-driver and graphviz (once)"; \
	    (apt-get install -y -q chromium chromium-driver graphviz >/dev/null 2>&1 \
	     || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium chromium-driver graphviz >/dev/null 2>&1)) \
	    || echo "warning: could not install chromium: the browser test will be skipped"; \
	else echo "note: no chromium and not root: the browser test will be skipped"; fi
