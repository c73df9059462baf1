// Draws the history charts (elements with data-series) with uPlot, on
// load and after htmx swaps a range in.
(function () {
  var colors = ["#1f6feb", "#c62828", "#b35900", "#6a1b9a", "#2e7d32"];
  function draw(root) {
    if (typeof uPlot === "undefined") return;
    root.querySelectorAll(".chart[data-series]:not([data-drawn])").forEach(function (el) {
      var s = JSON.parse(el.dataset.series);
      var data = [s.t].concat(s.s.map(function (x) { return x.data; }));
      var series = [{}].concat(s.s.map(function (x, i) {
        return { label: x.label, stroke: colors[i % colors.length], width: 1.5 };
      }));
      el.dataset.drawn = "1";
      new uPlot({ width: Math.max(el.clientWidth, 300), height: 200, series: series, scales: { y: { range: function (u, lo, hi) { return [0, Math.max(hi, 1)]; } } } }, data, el);
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function () { draw(document); });
})();
