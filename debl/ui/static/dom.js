// DeBL's status page: the helpers its scripts share (ui.js, early.js), as window.DeblDom.
// Every text goes in through textContent ("text"), nothing through innerHTML: a rejected line
// or a source's file name is raw input.
"use strict";
window.DeblDom = (() => {
  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k === "style") Object.assign(e.style, v);
      else e.setAttribute(k, v);
    }
    for (const kid of kids) if (kid !== null && kid !== undefined) e.append(kid);
    return e;
  }
  const int = (n) => Number(n || 0).toLocaleString("en-US");
  const mb = (n) =>
    `${(Number(n || 0) / 1e6).toLocaleString("en-US", {maximumFractionDigits: 1})} MB`;
  function secs(s) {
    if (s === null || s === undefined) return "-";
    if (s < 120) return `${s.toFixed(1)} s`;
    if (s < 7200) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
    return `${(s / 3600).toFixed(1)} h`;
  }
  const rate = (v) => v.toFixed(v >= 10 ? 0 : v >= 1 ? 1 : 2);
  const clock = (t) => (t ? new Date(t * 1000).toLocaleTimeString("en-GB") : "-");
  const firstLine = (text) => String(text || "").split("\n")[0];
  const clear = (node) => { node.replaceChildren(); return node; };
  const share = (x) => `${(100 * Number(x || 0)).toFixed(1)}%`;
  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }
  return {el, int, mb, secs, rate, clock, firstLine, clear, share, niceCeil};
})();
