// DeBL's status page: a load's answers before its uptime (docs/LOADING.md, "Answers before the
// copy ends"), as window.DeblEarly for ui.js: the block in the load's card (the shares of the
// key space and of the bytes answerable, the bytes fetched on demand and the keys waiting over
// the last minutes) and the claims found false, for the failures. File names and a claim's
// detail come from the source: set as text only.
"use strict";
window.DeblEarly = (() => {
  const {el, int, mb, rate, share} = window.DeblDom;
  const SPARK_W = 180, SPARK_H = 26;
  const DEMAND_COLOR = "#0891b2", WAITING_COLOR = "#f2b544";

  function headline(e, up, failed) {
    if (e.state === "stopped") {
      return (up ? "stopped at a false claim before the uptime" :
        "stopped at a false claim: queries wait for the uptime") + " (see Failures and rejects)";
    }
    if (failed && !up) return "answering from what the failed load copied; resume the load";
    return up ? "answered key by key before the uptime" :
      "a key is answered once every byte that can hold it is here; the bytes of the keys " +
      "queries wait for are fetched first";
  }

  function bar(x) {
    const width = `${Math.min(100, Math.max(0, Math.round(100 * x)))}%`;
    return el("span", {class: "progress wide"}, el("span", {style: {width}}));
  }

  // A line of *values* at times *t* over the history's window, its peak as the top.
  function spark(t, values, color, title) {
    const ratio = window.devicePixelRatio || 1;
    const canvas = el("canvas", {class: "spark", width: String(SPARK_W * ratio),
      height: String(SPARK_H * ratio), title});
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.strokeStyle = "#e3e7ee";
    g.beginPath(); g.moveTo(0, SPARK_H - 0.5); g.lineTo(SPARK_W, SPARK_H - 0.5); g.stroke();
    if (t.length < 2) return canvas;
    const top = Math.max(...values, 1e-9);
    const x = (ts) => (SPARK_W - 2) * (ts - t[0]) / (t[t.length - 1] - t[0]) + 1;
    const y = (v) => SPARK_H - 2 - (SPARK_H - 5) * v / top;
    g.strokeStyle = color;
    g.lineWidth = 1.5;
    g.beginPath();
    values.forEach((v, i) => (i ? g.lineTo(x(t[i]), y(v)) : g.moveTo(x(t[i]), y(v))));
    g.stroke();
    return canvas;
  }

  // The block in a load's card; *hist* is the page's early_history (null: none kept).
  function block(load, hist) {
    const e = load.early;
    if (!e) return null;
    const up = load.uptime !== null && load.uptime !== undefined;
    const box = el("div", {class: "early", dataset: {earlyState: e.state,
      keyShare: String(e.key_share), bytesShare: String(e.bytes_share),
      demandBytes: String(e.demand_bytes), keysWaiting: String(e.keys_waiting),
      claims: String(e.false_claims_total)}});
    const word = e.state === "stopped" ? "stopped" : up ? "done" : "on";
    box.append(el("div", {class: "early-head"},
      el("span", {class: "early-title", text: "Answers before uptime"}),
      el("span", {class: `badge early-${word}`, text: word}),
      el("span", {class: "muted", text: headline(e, up, load.state === "failed")})));
    const rows = el("div", {class: "early-rows"});
    const row = (key, name, graphic, figure) => rows.append(el("span", {text: name}),
      el("span", {dataset: {early: key}}, graphic),
      el("span", {class: "figure", dataset: {earlyFigure: key}, text: figure}));
    const was = up || e.state === "stopped" ? " (when it stopped)" : "";
    row("keys", `key space answerable${was}`, bar(e.key_share), share(e.key_share));
    row("bytes", `bytes answerable${was}`, bar(e.bytes_share),
      `${share(e.bytes_share)}: ${mb(e.answerable_bytes)} of ${mb(e.total_bytes)}`);
    const t = (hist && hist.t) || [];
    const perSecond = ((hist && hist.rates.demand_bytes) || []).map((v) => v / 1e6);
    const waiting = (hist && hist.levels && hist.levels.keys_waiting) || [];
    const over = t.length > 1 ? ` over the last ${Math.round(t[t.length - 1] - t[0])} s` : "";
    const now = perSecond.length ? perSecond[perSecond.length - 1] : 0;
    row("demand", "fetched on demand", spark(t, perSecond, DEMAND_COLOR,
      `MB/s fetched on demand${over}; peak ${rate(Math.max(0, ...perSecond))}`),
      `${mb(e.demand_bytes)} in all, ${rate(now)} MB/s now`);
    row("waiting", "keys waiting", spark(t, waiting, WAITING_COLOR,
      `keys waiting${over}; most ${int(Math.max(0, ...waiting))}`),
      `${int(e.keys_waiting)} now`);
    box.append(rows);
    return box;
  }

  // The claims of *load*'s manifests found false, for the failures (null: none).
  function claims(who, load) {
    const e = load && load.early;
    if (!e || !e.false_claims_total) return null;
    const box = el("div", {class: "claims", dataset: {load: load.load_id}});
    box.append(el("h3", {dataset: {claims: String(e.false_claims_total),
      earlyAnswers: String(e.answers_in_false_claims)},
      text: `${int(e.false_claims_total)} claim(s) of the manifests of load ${load.load_id} ` +
        `(${who}) found false: early answers stopped; ${int(e.answers_in_false_claims)} early ` +
        "answer(s) had been given in the id1s they affect"}));
    const table = el("table", {class: "list claims-table"}, el("tr", {},
      ...["file", "at byte", "kind", "claimed and found", "id1s affected",
        "early answers in them"].map((text) => el("th", {text}))));
    for (const c of e.false_claims) {
      table.append(el("tr", {dataset: {claim: String(c.claim_no)}},
        el("td", {class: "raw", text: c.file}), el("td", {text: int(c.offset)}),
        el("td", {text: c.kind}), el("td", {class: "error-text", text: c.detail}),
        el("td", {text: `${c.affected[0]}..${c.affected[1]}`}),
        el("td", {text: int(c.early_answers)})));
    }
    box.append(table);
    if (e.false_claims_total > e.false_claims.length) {
      box.append(el("p", {class: "muted",
        text: `the first ${e.false_claims.length} of ${int(e.false_claims_total)} shown`}));
    }
    return box;
  }

  return {block, claims};
})();
