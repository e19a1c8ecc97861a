  // ---- issue 28: attribution-out ----
  // The spend of the chosen period split by one tag key's values or by end user, per team:
  // GET /admin/usage/history?group_by=team,<split> summed over the days. "(none)" holds the
  // requests without a value, "(other)" those past the day's cap of named values. It scans
  // many more rows than the team figures, so the 10-second refresh asks again once a minute.
  let attrKeys = "", attrLast = "", attrAt = 0;
  function offerSplits(tagKeys) {
    if (tagKeys.join("\n") === attrKeys) return; // keep the chosen split across refreshes
    attrKeys = tagKeys.join("\n");
    const sel = $("attr-split");
    const chosen = sel.value;
    sel.replaceChildren(...tagKeys.map((k) => el("option", { value: "tag:" + k, text: "tag " + k })),
      el("option", { value: "user", text: "end user" }));
    sel.value = [...sel.options].some((o) => o.value === chosen && chosen !== "user") ? chosen : sel.options[0].value;
  }
  async function refreshAttribution(tagKeys) {
    offerSplits(tagKeys);
    const split = $("attr-split").value;
    const days = Number($("attr-period").value);
    const today = new Date();
    const from = new Date(today.getTime() - (days - 1) * 86400000);
    const path = "/admin/usage/history?group_by=team," + encodeURIComponent(split) + "&from=" + isoDay(from) + "&to=" + isoDay(today);
    if (path === attrLast && Date.now() - attrAt < 60000) return;
    attrLast = path; attrAt = Date.now();
    let hist;
    try { hist = await api("GET", path); } catch (e) { $("attr-error").textContent = e.message; attrLast = ""; return; }
    $("attr-error").textContent = "";
    const sums = new Map(), teamCost = new Map();
    for (const r of hist.rows) {
      const value = split === "user" ? r.user : r.tag_value;
      const k = r.team + "\n" + value;
      const s = sums.get(k) || { team: r.team, value, requests: 0, tokens: 0, cost: 0 };
      s.requests += r.requests; s.tokens += r.input_tokens + r.output_tokens; s.cost += r.cost;
      sums.set(k, s);
      teamCost.set(r.team, (teamCost.get(r.team) || 0) + r.cost);
    }
    const list = [...sums.values()].sort((a, b) => a.team.localeCompare(b.team) || b.cost - a.cost || b.requests - a.requests);
    $("attr-head").textContent = split === "user" ? "End user" : "Tag " + split.slice(4);
    const rows = list.map((s) => {
      const share = teamCost.get(s.team) > 0 ? s.cost / teamCost.get(s.team) : 0;
      const special = s.value === "(none)" || s.value === "(other)";
      const fill = el("div", {});
      fill.style.width = (share * 100).toFixed(1) + "%"; // CSSOM: the CSP allows no style attributes
      return el("tr", { "data-team": s.team, "data-value": s.value },
        el("td", { text: s.team }), el("td", { class: special ? "special" : "", text: s.value }),
        el("td", { class: "num", text: num(s.requests) }), el("td", { class: "num", text: compact(s.tokens) }),
        el("td", { class: "num cost", text: money(s.cost) }),
        el("td", { class: "share" }, el("div", { class: "bar" }, fill)));
    });
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { class: "empty", colspan: "6", text: "No usage in this period." })));
    $("attr-rows").replaceChildren(...rows);
  }
  for (const id of ["attr-split", "attr-period"]) {
    $(id).addEventListener("change", () => refreshAttribution(attrKeys ? attrKeys.split("\n") : []));
  }
  // ---- /issue 28: attribution-out ----
