  // ---- issue 45: health ----
  // The health view: GET /admin/health, read at each refresh. Per client model id, requests,
  // error rate and p50/p95 latency of the last hour and of today; each weighted route's
  // share of its model's calls; today's fallbacks by reason; the circuit breakers, named by
  // the model ids that send to them; and the recent requests (metadata only), of one team
  // when one is chosen. Figures marked "this replica" come from the replica that answered.
  const FALLBACK_REASONS = {
    status_5xx: "platform 5xx", status_429: "rate-limited (429)", timeout: "timeout", unreachable: "unreachable",
    first_token_timeout: "no first token in time", breaker_open: "breaker open", context_length: "input too long", other: "other",
  };
  function ms(x) {
    if (!x) return "—";
    if (x < 1) return "<1 ms";
    return x >= 1000 ? (x / 1000).toFixed(x >= 10000 ? 0 : 1) + " s" : Math.round(x) + " ms";
  }
  function pct(x) { return x ? (x * 100).toFixed(x < 0.1 ? 1 : 0) + "%" : "0%"; }
  function table(heads, rows, empty) {
    if (!rows.length) return el("div", { class: "empty", text: empty });
    return el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, el("tr", {}, ...heads.map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows)));
  }
  function figuresCells(f) {
    return [el("td", { class: "num", text: num(f.requests) }), el("td", { class: "num" + (f.error_rate >= 0.05 ? " bad" : ""), text: pct(f.error_rate) }),
      el("td", { class: "num", text: ms(f.p50_ms) + " / " + ms(f.p95_ms) })];
  }
  function renderHealthModels(models) {
    return table(["Model", "Requests (hour)", "Errors (hour)", "p50 / p95 (hour)", "Requests today", "Errors today", "p50 / p95 today"],
      models.map((m) => el("tr", { "data-model": m.model }, el("td", { text: m.model }), ...figuresCells(m.last_hour), ...figuresCells(m.today))),
      "No model calls yet.");
  }
  // renderRoutes shows each model's served-model split: its routes' shares of today's calls.
  function renderRoutes(routes) {
    const total = new Map();
    for (const r of routes) total.set(r.model, (total.get(r.model) || 0) + r.calls);
    return table(["Model", "Route (upstream model)", "Calls today", "Share"], routes.map((r) => {
      const share = total.get(r.model) ? r.calls / total.get(r.model) : 0;
      const fill = el("div", {});
      fill.style.width = (share * 100).toFixed(1) + "%";
      return el("tr", { "data-route": r.model + " " + r.upstream_model }, el("td", { text: r.model }), el("td", { text: r.upstream_model }),
        el("td", { class: "num", text: num(r.calls) }), el("td", { class: "share" }, el("div", { class: "split" }, el("div", { class: "bar" }, fill), el("span", { text: pct(share) }))));
    }), "No weighted routes called today.");
  }
  function renderFallbacks(list) {
    return table(["Model asked", "Served by", "Why", "Calls today"], list.map((f) =>
      el("tr", { "data-fallback": f.model + " " + f.served_model + " " + f.reason }, el("td", { text: f.model }), el("td", { text: f.served_model }),
        el("td", { text: FALLBACK_REASONS[f.reason] || f.reason }), el("td", { class: "num", text: num(f.count) }))), "No fallbacks today.");
  }
  // renderBreakers lists the circuit breakers that are not closed, or have failures in their
  // window; the section hides while every breaker is quiet. A model's breaker goes by the
  // model ids users configured; an open one says what opened it, as its window's count
  // starts again at 0.
  function renderBreakers(list) {
    const shown = list.filter((b) => b.state !== "closed" || b.failures > 0);
    const box = $("breakers");
    box.hidden = shown.length === 0;
    if (box.hidden) { box.replaceChildren(); return; }
    const opened = (b) => {
      if (b.state === "closed") return num(b.failures) + " in this window";
      if (b.opened_by === "failures") return "opened by " + num(b.opened_after_failures) + " failures";
      if (b.opened_by === "failed_probe") return "its probe failed";
      if (b.opened_by === "other_replica") return "opened by another replica";
      return "open";
    };
    const rows = shown.map((b) => {
      const name = b.models && b.models.length ? b.models.join(", ") : b.name;
      return el("tr", { "data-breaker": b.name, class: "breaker-" + b.state },
        el("td", {}, el("b", { text: name }), b.models && b.models.length ? el("span", { class: "muted", text: " " + b.name }) : null),
        el("td", { text: b.state }), el("td", { class: "failures", text: opened(b) }), el("td", { text: when(b.opened_at) }));
    });
    box.replaceChildren(el("h2", { text: "Circuit breakers" }),
      table(["Breaker", "State", "Failures", "Opened"], rows, ""));
  }
  function renderRecent(list) {
    return table(["Time (UTC)", "Team", "Key", "Model", "Served by", "Status", "Tokens in / out", "Cost", "Duration"], list.map((r) =>
      el("tr", { "data-status": String(r.status) },
        el("td", { text: (r.time || "").slice(11, 19) }), el("td", { text: r.team || "—" }), el("td", { class: "muted", text: r.key || "—" }),
        el("td", { text: r.model }), el("td", { text: r.served_model || r.upstream_model || "" }),
        el("td", { class: "num" + (r.status >= 500 ? " bad" : ""), text: String(r.status) }),
        el("td", { class: "num", text: compact(r.input_tokens) + " / " + compact(r.output_tokens) }),
        el("td", { class: "num", text: money(r.cost_micros / 1e6) }), el("td", { class: "num", text: ms(r.duration_ms) }))),
    "No requests yet.");
  }
  function offerHealthTeams(names) {
    const sel = $("health-team");
    const have = [...sel.options].map((o) => o.value).slice(1);
    if (have.join("\n") === names.join("\n")) return;
    const chosen = sel.value;
    sel.replaceChildren(el("option", { value: "", text: "every team" }), ...names.map((n) => el("option", { value: n, text: n })));
    sel.value = names.includes(chosen) ? chosen : "";
  }
  // refreshHealth reads the view and draws it; it returns the breakers for the section on
  // top of the page. A server without the route leaves the view empty, not the dashboard.
  async function refreshHealth(teamNames) {
    offerHealthTeams(teamNames);
    const team = $("health-team").value;
    let h;
    try {
      h = await api("GET", "/admin/health?limit=50" + (team ? "&team=" + encodeURIComponent(team) : ""));
    } catch (e) {
      if (e instanceof AuthError) throw e;
      $("health-error").textContent = "The health view could not be read: " + e.message;
      return [];
    }
    $("health-error").textContent = "";
    $("health-models").replaceChildren(renderHealthModels(h.models));
    // Shared by the replicas: the usage history's requests and cost today, by the model
    // that served them.
    const shared = (h.usage_today || []).map((u) => u.model + " " + num(u.requests) + " req · " + money(u.cost));
    $("health-shared").textContent = shared.length ? "All replicas today" + (team ? " (" + team + ")" : "") + ": " + shared.join(" · ") : "";
    $("health-routes").replaceChildren(renderRoutes(h.routes));
    $("health-fallbacks").replaceChildren(renderFallbacks(h.fallbacks));
    $("health-recent").replaceChildren(renderRecent(h.recent));
    return h.breakers || [];
  }
  $("health-team").addEventListener("change", () => refresh());
  // ---- /issue 45: health ----
