// DeBL's status page: polls status.json every second and draws it. Every text from the
// server goes in through textContent (a rejected line is raw input), nothing through innerHTML.
"use strict";
(() => {
  const POLL_MS = 1000;
  const FETCH_TIMEOUT_MS = 5000;
  const STATES = ["pending", "queued", "running", "loaded", "failed"];
  const ROUTES = {
    immediate: ["at once (MySQL / HBase)", "#22a06b"],
    early: ["early (before uptime: every byte of its key here)", "#c026d3"],
    raw: ["raw (bucket files in HDFS)", "#3b82f6"],
    buffered: ["buffered until its bucket landed", "#f2b544"],
    waited_uptime: ["waited for uptime", "#7c3aed"],
    partial: ["partial (past its deadline)", "#8a94a6"],
    timeouts: ["timed out", "#e5484d"],
    // where the cold rows came from (coordinator.coordinator.VIA), and the hot files read raw
    via_mysql: ["from MySQL alone (no cold row)", "#0e7490"],
    via_hbase: ["from HBase (bucket loaded)", "#15803d"],
    via_hot_raw: ["hot keys from the hot files (before MySQL took over)", "#c2410c"],
  };
  const PHASES = {
    sample: "sample (split points)", copy: "copy", dist_ch: "dist_ch (bucketing)",
    hot: "hot path into MySQL", mysql_load: "\u2003LOAD DATA", mysql_merge: "\u2003merge",
    mysql_index: "\u2003index", hot_files_removed: "hot bucket files removed",
    demand: "fetched and bucketed on demand",
    hfiles: "gen_HF: HFiles", bulkload: "gen_HF: bulk load",
  };
  const $ = (id) => document.getElementById(id);
  let last = null;          // the last JSON received
  let serverDown = null;    // why the last poll failed, or null

  const {el, int, mb, secs, rate, clock, firstLine, clear, niceCeil} = window.DeblDom;
  const early = window.DeblEarly;

  // ------------------------------------------------------------------ polling
  async function poll() {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), FETCH_TIMEOUT_MS);
    try {
      const resp = await fetch("status.json", {cache: "no-store", signal: abort.signal});
      if (!resp.ok) throw new Error(`HTTP ${resp.status}`);
      last = await resp.json();
      serverDown = null;
    } catch (err) {
      serverDown = err.name === "AbortError" ? "no answer within 5 s" : String(err.message || err);
    } finally {
      clearTimeout(timer);
    }
    try {
      render(last);
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  // ------------------------------------------------------------------ the page
  function render(data) {
    renderBanners(data);
    if (!data) return;
    const status = data.status;
    $("dataset").textContent = `database ${data.dataset.database} on MySQL ${data.dataset.mysql}`;
    renderServices(data.services);
    const age = data.status_age_s;
    $("updated").textContent = status ? `status read ${clock(status.now)}` +
      (age > 3 * data.interval_s ? ` (${secs(age)} ago)` : "") : "";
    const empty = $("empty");
    if (!status || !status.load) {
      empty.hidden = false;
      empty.textContent = !status
        ? (data.error ? "No status read yet: see the message above." : "Reading the status\u2026")
        : "No load yet: run `debl load SOURCE`, and this page follows it.";
    } else {
      empty.hidden = true;
    }
    renderDays(status, data.early_history);
    renderBuckets(status);
    drawChart(data);
    renderFresh(status);
    renderJobs(status);
    renderProblems(status, data.rejects);
  }

  function renderBanners(data) {
    const box = clear($("banners"));
    const add = (kind, level, text) => box.append(el("div", {class: `banner ${level}`,
      dataset: {kind}, text}));
    if (serverDown) {
      add("server", "bad", `debl ui does not answer (${serverDown}): stopped? The page shows ` +
        "what it had last.");
    }
    if (!data) return;
    if (data.error) {
      const shown = data.status
        ? ` The page shows the status read at ${clock(data.status.now)}.` : "";
      add("mysql", "bad", `The status cannot be read since ${clock(data.error_since)}: ` +
        `${data.error}.${shown}`);
    } else if (data.status_age_s > 5 * data.interval_s) {
      add("stale", "warn", `The status is ${secs(data.status_age_s)} old: MySQL has not ` +
        "answered the last read yet.");
    }
    for (const s of data.services) {
      if (s.service !== "MySQL" && s.ok === false) {
        add(s.service.toLowerCase(), "bad", `${s.service} at ${s.address} ${s.detail} ` +
          `(checked ${clock(s.checked)}).`);
      }
    }
  }

  function renderServices(services) {
    const box = clear($("services"));
    for (const s of services) {
      box.append(el("span", {class: "service", dataset: {service: s.service, ok: String(s.ok)},
        title: `${s.address}: ${s.detail}`, text: s.service}));
    }
  }

  // ------------------------------------------------------------------ the days
  function renderDays(status, earlyHistory) {
    const box = clear($("days"));
    const prev = $("previous");
    prev.hidden = true;
    if (!status || !status.load) return;
    box.append(dayCard(status.load.state === "up" ? "serving" : "first", status.load,
      status.phases, status.buckets, status, earlyHistory));
    if (status.loading) {
      box.append(dayCard("loading", status.loading, status.loading.phases,
        status.loading.buckets, null));
    }
    if (status.previous) {
      const p = status.previous;
      prev.hidden = false;
      prev.textContent = `Previous day: load ${p.load_id} (${p.approach}), up ` +
        `${secs(p.uptime_s)} after its start; kept for \`debl rollback\` until cleanup drops it.`;
    }
  }

  function hotText(load, serving) {
    switch (load.hot_state) {
      case "none": return "no hot file";
      case "mysql": return `in MySQL: ${int(load.hot_rows)} rows, id1 ${load.hot_k_lo}..` +
        `${load.hot_k_hi}; taken over ${secs(load.taken_over_s)} after the start`;
      case "failed": return "MySQL's hot path failed: answered from the hot files' buckets; " +
        "resume the load";
      default:
        if (load.wait_for_hot) return "MySQL is taking them in (the paper's uptime waits for it)";
        return serving ? "answered from the hot files' buckets while MySQL takes them in"
          : "MySQL is taking them in; till then the hot files' buckets will answer them";
    }
  }

  function dayCard(role, load, phases, buckets, status, earlyHistory) {
    const answering = load.early && load.early.state === "on";
    const titles = {serving: "serving", first: load.state === "failed" ? "failed" :
      answering ? "loading, answering early" : "loading (not up yet)",
      loading: "next day, loading beside it"};
    const card = el("article", {class: "day",
      id: role === "loading" ? "day-loading" : "day-current",
      dataset: {load: load.load_id, state: load.state, role}});
    card.append(el("div", {class: "day-head"},
      el("span", {class: "role", text: titles[role]}),
      el("h3", {text: `load ${load.load_id}`}),
      el("span", {class: `badge ${load.state}`, text: load.state}),
      el("span", {class: "muted", text: load.approach})));
    const facts = el("dl", {class: "facts"});
    const fact = (name, value, cls) => facts.append(el("dt", {text: name}),
      el("dd", {class: cls, dataset: {fact: name}, text: value}));
    fact("source", load.source);
    fact("started", `${clock(load.started)} (${secs(load.age_s)} ago)`);
    fact("uptime", load.uptime_s === null ?
      (role === "loading" ? "not yet: the serving day answers meanwhile" : answering ?
        "not yet: the keys answerable so far are answered, the others wait" :
        "not yet: queries wait") :
      `${secs(load.uptime_s)} after the start (${clock(load.uptime)})`);
    fact("hot rows", hotText(load, role === "serving"));
    const input = load.input;
    if (input) {
      fact("input", `${int(input.files)} files, ${mb(input.bytes)} (hot: ${int(input.hot_files)} ` +
        `files, ${mb(input.hot_bytes)})`);
    }
    if (buckets && buckets.total) {
      fact("buckets", `${int(buckets.loaded)} of ${int(buckets.total)} in HBase; ` +
        `${mb(buckets.loaded_bytes)} of ${mb(buckets.bytes)}`);
    }
    if (status) {
      const full = status.full_availability;
      fact("full availability", full ? `${secs(full.seconds)} after the start ` +
        `(${secs(full.after_uptime_s)} after uptime)` : "not yet");
      const a = status.answers;
      fact("answered", `${int(a.total)} queries by ${int(a.coordinators)} coordinator(s)`);
    }
    if (load.error) fact("error", firstLine(load.error), "error-text");
    card.append(facts, early.block(load, earlyHistory || null),
      phaseTable(load, phases || [], buckets, status));
    if (role === "loading" && buckets && buckets.list && buckets.list.length) {
      card.append(el("div", {class: "muted", text: "its buckets so far"}),
        bucketStrip(buckets.list, true));
    }
    return card;
  }

  function phaseTable(load, phases, buckets, status) {
    const now = status ? status.now : load.started + load.age_s;
    const full = status && status.full_availability;
    let span = load.age_s;
    if (full) {
      const ends = phases.map((p) => (p.last_end || now) - load.started);
      span = Math.max(full.seconds, load.uptime_s || 0, ...ends);
    }
    span = Math.max(span, 1) * 1.02;
    const at = (seconds) => `${Math.min(100, Math.max(0, 100 * seconds / span))}%`;
    const marks = [];
    if (load.uptime_s !== null) marks.push(["uptime", load.uptime_s]);
    if (load.taken_over_s !== null) marks.push(["takeover", load.taken_over_s]);
    if (full) marks.push(["full", full.seconds]);
    const track = (from, to, open) => {
      const box = el("div", {class: "track-box"});
      if (from !== null) {
        box.append(el("div", {class: `track-bar ${open ? "open" : "done"}`,
          style: {left: at(from), width: `calc(${at(to)} - ${at(from)})`}}));
      }
      for (const [kind, t] of marks) {
        box.append(el("div", {class: `mark ${kind}`, style: {left: at(t)}}));
      }
      return box;
    };
    const input = load.input || {bytes: 0, hot_bytes: 0};
    const cold = input.bytes - input.hot_bytes;
    const onDemand = (phases.find((p) => p.phase === "demand") || {bytes: 0}).bytes;
    const totals = {copy: input.bytes, dist_ch: load.wait_for_hot ? cold : input.bytes,
      hot: input.hot_bytes, mysql_load: input.hot_bytes, mysql_merge: input.hot_bytes,
      mysql_index: input.hot_bytes};
    const table = el("table", {class: "phases"});
    table.append(el("tr", {}, ...["phase", `timeline: ${secs(span / 1.02)}`, "items",
      "MB", "MB/s", "done"].map((t) => el("th", {text: t, title: t}))));
    const sorted = [...phases].sort((a, b) => a.first_start - b.first_start);
    for (const p of sorted) {
      const total = totals[p.phase];
      let done = null;
      // a load answering early buckets the pieces it fetches on demand in its own process
      // (phase demand): bucketed are dist_ch's bytes and those
      const bytes = p.phase === "dist_ch" ? p.bytes + onDemand : p.bytes;
      if (total) done = Math.min(1, bytes / total);
      if (!p.open && done === null) done = 1;
      if (p.phase === "hfiles" || p.phase === "bulkload") {
        done = buckets && buckets.bytes ? buckets.loaded_bytes / buckets.bytes : null;
      }
      // copy and dist_ch record each chunk once it is done: a phase short of its total while
      // the load runs is still going on
      const going = p.open > 0 || (done !== null && done < 1 && load.state === "running");
      const from = p.first_start - load.started;
      const to = (p.last_end && !going ? p.last_end : now) - load.started;
      table.append(phaseRow(p.phase, PHASES[p.phase] || p.phase, track(from, to, going),
        int(p.items), p.bytes ? mb(p.bytes).replace(" MB", "") : "",
        p.bytes && p.wall_s > 0 ? rate(p.bytes / 1e6 / p.wall_s) : "", done, p.open));
    }
    if (load.hot_state !== "none") {
      const taken = load.hot_state === "mysql";
      const word = {loading: "not yet", mysql: "done", failed: "failed"}[load.hot_state];
      table.append(phaseRow("takeover", "MySQL take-over", track(null), "",
        "", "", taken ? 1 : 0, 0, word || load.hot_state));
    }
    const legend = el("div", {class: "marks-legend"}, "marks:",
      el("i", {style: {background: "var(--uptime)"}}), "uptime",
      el("i", {style: {background: "var(--takeover)"}}), "MySQL took the hot keys over",
      el("i", {style: {background: "var(--full)"}}), "full availability");
    return el("div", {}, table, legend);
  }

  function phaseRow(key, name, track, items, bytes, rate, done, open, state) {
    const progress = done === null ? el("span", {class: "muted", text: "-"}) : el("span", {},
      el("span", {class: "progress"}, el("span", {style: {width: `${Math.round(done * 100)}%`}})),
      state ? state : `${Math.round(done * 100)}%`);
    return el("tr", {title: open ? `${open} item(s) running` : null,
      dataset: {phase: key, open: String(open || 0), done: done === null ? "" : done.toFixed(3)}},
      el("td", {text: name, title: name.trim()}), el("td", {class: "track"}, track),
      el("td", {class: "num", text: items}),
      el("td", {class: "num", text: bytes}), el("td", {class: "num", text: rate}),
      el("td", {}, progress));
  }

  // ------------------------------------------------------------------ the bucket map
  function bucketStrip(list, small) {
    const size = small || list.length > 120 ? " small" : list.length <= 48 ? " wide" : "";
    const strip = el("div", {class: `strip${size}`});
    const most = Math.max(0, ...list.map((b) => b.demand || 0));
    const top = new Set([...list].filter((b) => b.demand > 0)
      .sort((a, b) => b.demand - a.demand).slice(0, 3).map((b) => b.b_index));
    for (const b of list) {
      const shade = most > 0 && b.demand > 0 ? 0.12 + 0.5 * b.demand / most : 0;
      const cell = el("div", {class: `cell${top.has(b.b_index) ? " hot-demand" : ""}`,
        dataset: {b: String(b.b_index), state: b.state, demand: String(b.demand || 0)},
        title: `bucket ${b.b_index}: [${b.k_lo}, ${b.k_hi}]\ncold id1 ${b.c_lo}..${b.c_hi}\n` +
          `${int(b.rows)} rows, ${mb(b.bytes)}\n${b.state}; demand ${int(b.demand)}, asked ` +
          `${int(b.asked)}`});
      cell.style.setProperty("--shade", shade.toFixed(3));
      strip.append(cell);
    }
    return strip;
  }

  function renderBuckets(status) {
    const section = $("buckets-section");
    const list = status && status.load && status.buckets.list;
    section.hidden = !list || !list.length;
    if (section.hidden) return;
    const b = status.buckets;
    $("bucket-count").textContent = `${int(b.loaded)} of ${int(b.total)} loaded, ` +
      `${mb(b.bytes)}, largest ${mb(b.largest_bytes)}`;
    const strip = bucketStrip(list, false);
    strip.id = "buckets";
    strip.setAttribute("aria-label", "bucket map");
    $("buckets").replaceWith(strip);
    const legend = clear($("bucket-legend"));
    for (const state of STATES) {
      const swatch = el("span", {class: "swatch", style: {background: `var(--${state})`}});
      legend.append(el("span", {}, swatch,
        `${state} `, el("span", {class: "figure", text: int(b.by_state[state])})));
    }
    legend.append(el("span", {class: "muted", text: "darker: more demand (queries waiting " +
      "on it, or answered raw lately); outlined: the most wanted; hover for its range"}));
    const d = status.demand;
    $("demand-top").textContent = d.total ? `demand: ${int(d.total)} on ${int(d.buckets)} ` +
      `bucket(s) from ${int(d.coordinators)} coordinator(s); most: ` +
      d.top.map((t) => `bucket ${t.b_index} (${int(t.waiting)})`).join(", ") : "demand: none now";
  }

  // ------------------------------------------------------------------ answers over time
  function drawChart(data) {
    const canvas = $("answers-chart");
    const hist = data.history;
    const status = data.status;
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 960;
    const h = canvas.clientHeight || 220;
    canvas.width = Math.round(w * ratio);
    canvas.height = Math.round(h * ratio);
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, h);
    const left = 52, right = 12, top = 10, bottom = 24;
    const t = hist.t;
    const end = t.length ? t[t.length - 1] : data.served_at;
    const span = Math.min(hist.window_s, Math.max(60, t.length ? end - t[0] : 60));
    const start = end - span;
    const routes = Object.keys(hist.rates);
    let ymax = 0;
    for (const r of routes) for (const v of hist.rates[r]) ymax = Math.max(ymax, v);
    ymax = niceCeil(Math.max(ymax, 1));
    const x = (ts) => left + (w - left - right) * (ts - start) / span;
    const y = (v) => h - bottom - (h - top - bottom) * v / ymax;
    g.font = "11px system-ui, 'DejaVu Sans', sans-serif";
    g.strokeStyle = "#e3e7ee";
    g.fillStyle = "#667085";
    g.lineWidth = 1;
    for (const v of [0, ymax / 2, ymax]) {
      g.beginPath(); g.moveTo(left, y(v)); g.lineTo(w - right, y(v)); g.stroke();
      g.textAlign = "right"; g.fillText(`${v.toLocaleString("en-US")}/s`, left - 6, y(v) + 4);
    }
    const step = span > 300 ? 120 : 30;
    g.textAlign = "center";
    for (let ts = Math.ceil(start / step) * step; ts <= end; ts += step) {
      g.fillText(clock(ts).slice(0, span > 300 ? 5 : 8), x(ts), h - 6);
    }
    const marks = [];
    const loadMarks = (load, who) => {
      if (!load) return;
      if (load.uptime) marks.push([load.uptime, `${who}up`, "#22a06b"]);
      if (load.taken_over_s !== null) {
        marks.push([load.started + load.taken_over_s, `${who}MySQL`, "#7c3aed"]);
      }
    };
    if (status) { loadMarks(status.load, ""); loadMarks(status.loading, "next day "); }
    g.setLineDash([4, 3]);
    for (const [ts, label, color] of marks) {
      if (ts < start || ts > end) continue;
      g.strokeStyle = color; g.fillStyle = color;
      g.beginPath(); g.moveTo(x(ts), top); g.lineTo(x(ts), h - bottom); g.stroke();
      g.textAlign = "left"; g.fillText(label, x(ts) + 3, top + 10);
    }
    g.setLineDash([]);
    g.lineWidth = 2;
    for (const r of routes) {
      const values = hist.rates[r];
      if (!values.some((v) => v > 0)) continue;
      g.strokeStyle = (ROUTES[r] || [r, "#444"])[1];
      g.beginPath();
      let drawing = false;
      for (let i = 0; i < t.length; i++) {
        const gap = i > 0 && t[i] - t[i - 1] > 3 * data.interval_s;
        if (!drawing || gap) g.moveTo(x(t[i]), y(values[i])); else g.lineTo(x(t[i]), y(values[i]));
        drawing = true;
      }
      g.stroke();
    }
    if (!t.length || !routes.some((r) => hist.rates[r].some((v) => v > 0))) {
      g.fillStyle = "#98a2b3"; g.textAlign = "center";
      g.fillText("no answers in this window", left + (w - left - right) / 2,
        top + (h - top - bottom) / 2);
    }
    $("answers-window").textContent = `(last ${secs(span)}, of the serving load)`;
    const legend = clear($("answers-legend"));
    const totals = status && status.answers ? status.answers.by_route : {};
    const shown = new Set([...routes, ...Object.keys(totals)]);
    for (const r of Object.keys(ROUTES).concat([...shown].filter((k) => !ROUTES[k]))) {
      const values = hist.rates[r] || [];
      const now = values.length ? values[values.length - 1] : 0;
      const always = r === "immediate" || r === "raw" || r === "buffered";
      if (!always && !totals[r] && !values.some((v) => v > 0)) continue;
      const [label, color] = ROUTES[r] || [r, "#444"];
      legend.append(el("span",
        {dataset: {route: r, total: String(totals[r] || 0), rate: String(now)}},
        el("span", {class: "swatch", style: {background: color}}), `${label} `,
        el("span", {class: "figure", text: `${now.toFixed(1)}/s, ${int(totals[r])} in all`})));
    }
  }

  // ------------------------------------------------------------------ fresh answers
  // Each source's follower (where it is, how far behind the source's head) and what the
  // serving load's coordinators applied (docs/FRESHNESS.md), as `debl status` says them.
  function renderFresh(status) {
    const followers = (status && status.followers) || [];
    const fresh = status && status.fresh;
    $("fresh-section").hidden = !followers.length && !fresh;
    const list = clear($("followers"));
    for (const f of followers) {
      const behind = f.behind === null ? "" : `, ${int(f.behind)} transaction(s) behind the ` +
        `source's head ${f.head_gtid} (read ${secs(f.head_age_s)} ago)`;
      const lag = f.lag_s === null ? "" : `; its last captured commit was captured ` +
        `${secs(f.lag_s)} after it`;
      list.append(el("li", {dataset: {source: f.source, state: f.state}},
        `follower of source ${f.source}: ${f.state}, captured up to GTID ${f.gtid}${behind}; ` +
        `${int(f.changes)} changes captured${lag}`,
        f.error ? el("div", {class: "error-text", text: `error: ${firstLine(f.error)}`}) : null));
    }
    const applied = $("fresh-applied");
    if (!fresh) {
      applied.textContent = "";
    } else if (!fresh.followed) {
      applied.textContent = `no follower has captured source ${fresh.source} yet: start ` +
        "`debl follow` (with fresh.mode on, queries wait for it)";
    } else if (!fresh.kept) {
      applied.textContent = `the change log of source ${fresh.source} no longer holds every ` +
        "change since this load's dump: its answers cannot be kept fresh; dump and load again";
    } else {
      applied.textContent = `serving load: changes applied on demand ` +
        `${int(fresh.applied_on_demand)} (${int(fresh.refreshes_on_demand)} refreshes), in ` +
        `the background ${int(fresh.applied_background)} ` +
        `(${int(fresh.refreshes_background)}); buffered ${int(fresh.buffered)}; ` +
        `${int(fresh.timed_out)} queries timed out waiting for the change log`;
    }
  }

  // ------------------------------------------------------------------ jobs and failures
  function renderJobs(status) {
    const running = (status && status.running_jobs) || [];
    $("jobs-section").hidden = running.length === 0;
    const list = clear($("running-jobs"));
    for (const j of running) {
      list.append(el("li", {dataset: {b: String(j.b_index)}, text: `bucket ${j.b_index}, run ` +
        `${j.run_id || "-"}: ${secs(j.running_s)} so far, attempt ${j.attempts}`}));
    }
  }

  function renderProblems(status, rejects) {
    const failedBox = clear($("failed-jobs"));
    const rejectBox = clear($("rejects"));
    const failed = (status && status.failed_jobs) || [];
    if (failed.length) {
      const table = el("table", {class: "list", id: "failed-table"},
        el("tr", {}, ...["bucket", "attempts", "error"].map((t) => el("th", {text: t}))));
      for (const j of failed) {
        table.append(el("tr", {dataset: {b: String(j.b_index)}},
          el("td", {text: String(j.b_index)}),
          el("td", {text: String(j.attempts)}), el("td", {class: "error-text", title: j.error,
            text: firstLine(j.error) || "-"})));
      }
      failedBox.append(el("h3", {text: `${failed.length} gen_HF job(s) failed`}), table);
    }
    let any = failed.length > 0;
    const days = [["serving", status && status.load], ["next day", status && status.loading]];
    const claimBox = clear($("false-claims"));
    for (const [who, load] of days) {
      const claims = early.claims(who, load);
      if (claims) claimBox.append(claims);
      any = any || claims !== null;
    }
    for (const [who, load] of days) {
      if (!load || !load.rejects || !load.rejects.total) continue;
      any = true;
      rejectBox.append(el("h3", {dataset: {rejects: String(load.rejects.total)},
        text: `${int(load.rejects.total)} line(s) rejected by load ${load.load_id} (${who}): ` +
          load.rejects.files.map((f) => `${f.file} ${int(f.rejects)}`).join(", ")}));
      if (who !== "serving" || !rejects) continue;
      if (rejects.note) rejectBox.append(el("p", {class: "muted", text: rejects.note}));
      if (rejects.records.length) {
        const table = el("table", {class: "list", id: "reject-table"},
          el("tr", {}, ...["file:line", "reason", "the line"].map((t) => el("th", {text: t}))));
        for (const r of rejects.records) {
          table.append(el("tr", {}, el("td", {text: `${r.file}:${r.line_no}`}),
            el("td", {class: "error-text", text: r.reason}),
            el("td", {class: "raw", text: r.line})));
        }
        rejectBox.append(table, el("p", {class: "muted", text: `all of them: ${rejects.dir}`}));
      }
    }
    $("problems-section").hidden = !any;
  }

  poll();
})();
