/* The portal's own script: small progressive enhancements. Every page works without it, and the Content
   Security Policy runs nothing inline, so behaviour hangs off data-* attributes set by the templates. */
(function () {
  "use strict";

  // Times are written in UTC (<time datetime="…">); show them in the viewer's zone, UTC on hover.
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      if (el.dataset.localised) return;
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when)) return;
      el.title = when.toISOString().replace(".000Z", "Z").replace("T", " ") + " UTC";
      el.textContent = el.dataset.format === "date"
        ? when.toLocaleDateString()
        : when.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
      el.dataset.localised = "1";
    });
  }

  // <button data-copy="#id"> copies the text of the element it names.
  function copyButtons(root) {
    root.querySelectorAll("button[data-copy]").forEach(function (button) {
      if (button.dataset.bound) return;
      button.dataset.bound = "1";
      button.addEventListener("click", function () {
        var target = document.querySelector(button.dataset.copy);
        if (!target || !navigator.clipboard) return;
        navigator.clipboard.writeText(target.textContent.trim()).then(function () {
          var label = button.textContent;
          button.textContent = "Copied";
          setTimeout(function () { button.textContent = label; }, 1500);
        });
      });
    });
  }

  // <form data-confirm="…"> asks before it is sent.
  function confirmations(root) {
    root.querySelectorAll("form[data-confirm]").forEach(function (form) {
      if (form.dataset.bound) return;
      form.dataset.bound = "1";
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.dataset.confirm)) event.preventDefault();
      });
    });
  }

  // <div data-chart="id-of-json"> draws the series of a json_script block with uPlot.
  var PALETTE = ["#3b5bdb", "#f08c00", "#2b8a3e", "#c2255c", "#7048e8", "#0c8599", "#5c940d", "#e8590c"];
  function charts(root) {
    if (typeof window.uPlot === "undefined") return;
    root.querySelectorAll("[data-chart]").forEach(function (el) {
      if (el.dataset.drawn) return;
      var source = document.getElementById(el.dataset.chart);
      if (!source) return;
      var data = JSON.parse(source.textContent);
      el.dataset.drawn = "1";
      var series = [{ label: "Time", value: function (u, v) { return v == null ? "" : new Date(v * 1000).toLocaleString(); } }];
      data.series.forEach(function (s, i) {
        var colour = PALETTE[i % PALETTE.length];
        series.push({
          label: s.label, stroke: colour, width: 2, fill: s.fill ? colour + "22" : undefined,
          dash: s.dash ? [6, 4] : undefined, points: { show: data.x.length < 60 },
          value: function (u, v) { return v == null ? "–" : v.toFixed(2) + " " + (data.unit || ""); }
        });
      });
      var opts = {
        width: el.clientWidth || 600, height: 300, series: series,
        axes: [{}, { label: data.unit || "", size: 60 }],
        // x in epoch seconds (uPlot's unit). Every period of the days asked is in x, so the data span them;
        // a lone period (one day by day) gets the range asked, not years uPlot would widen it to. A zoom
        // (min < max) is kept as asked.
        scales: { x: { time: true, range: function (u, min, max) { return min < max ? [min, max] : data.range; } } },
        legend: { live: true }, cursor: { drag: { x: true, y: false } }
      };
      var plot = new window.uPlot(opts, [data.x].concat(data.series.map(function (s) { return s.values; })), el);
      el.uplot = plot;  // what it drew (scales, axis labels), for the browser tests and the console
      window.addEventListener("resize", function () { plot.setSize({ width: el.clientWidth, height: 300 }); });
    });
  }

  function enhance(root) { localTimes(root); copyButtons(root); confirmations(root); charts(root); }

  document.addEventListener("DOMContentLoaded", function () { enhance(document); });
  // Parts of the page swapped in by htmx (live cluster status) get the same treatment.
  document.addEventListener("htmx:load", function (event) { enhance(event.target); });
})();
