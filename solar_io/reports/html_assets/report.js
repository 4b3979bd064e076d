// solar-io HTML report: sortable and filterable tables, roofline hover. No network, no libraries.
(function () {
  "use strict";
  function cellValue(td) {
    var v = td.getAttribute("data-v");
    if (v === null) { v = td.textContent; }
    var x = parseFloat(v);
    return (v !== "" && !isNaN(x) && isFinite(x)) ? x : v.toLowerCase();
  }
  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    rows.sort(function (a, b) {
      var x = cellValue(a.cells[col]), y = cellValue(b.cells[col]);
      var nx = typeof x === "number", ny = typeof y === "number";
      var r = (nx && ny) ? x - y : (nx ? -1 : (ny ? 1 : (x < y ? -1 : (x > y ? 1 : 0))));
      return asc ? r : -r;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  function count(table) {
    var out = document.querySelector('[data-count-for="' + table.id + '"]');
    if (!out) { return; }
    var shown = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) { if (r.style.display !== "none") { shown++; } });
    out.textContent = shown + " of " + table.tBodies[0].rows.length + " rows";
  }
  function filter(table, text) {
    var words = text.toLowerCase().split(/\s+/).filter(Boolean);
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
      var t = r.textContent.toLowerCase();
      r.style.display = words.every(function (w) { return t.indexOf(w) >= 0; }) ? "" : "none";
    });
    count(table);
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener("click", function () { sortBy(table, i, th); });
    });
    count(table);
  });
  document.querySelectorAll("input[data-filter-for]").forEach(function (input) {
    var table = document.getElementById(input.getAttribute("data-filter-for"));
    input.addEventListener("input", function () { filter(table, input.value); });
  });
  var tip = document.getElementById("tip");
  document.querySelectorAll("svg.roofline circle[data-label]").forEach(function (c) {
    var row = c.getAttribute("data-row") ? document.getElementById(c.getAttribute("data-row")) : null;
    c.addEventListener("mouseenter", function () {
      tip.textContent = c.getAttribute("data-label");
      tip.style.display = "block";
      if (row) { row.classList.add("hl"); }
    });
    c.addEventListener("mousemove", function (e) {
      tip.style.left = (e.clientX + 12) + "px";
      tip.style.top = (e.clientY + 12) + "px";
    });
    c.addEventListener("mouseleave", function () {
      tip.style.display = "none";
      if (row) { row.classList.remove("hl"); }
    });
    c.addEventListener("click", function () {
      if (!row) { return; }
      var input = document.querySelector('input[data-filter-for="' + row.parentNode.parentNode.id + '"]');
      if (input) { input.value = c.getAttribute("data-name"); input.dispatchEvent(new Event("input")); }
      row.scrollIntoView({block: "center"});
    });
  });
}());
