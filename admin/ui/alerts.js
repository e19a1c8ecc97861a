  // ---- issue 28: alerts ----
  // refreshAlerts shows the budget thresholds crossed today (UTC), by any replica: who, which
  // budget, which threshold, what was used of what limit, and when. It reads /admin/usage on
  // its own, so the page's main refresh is untouched; a server without alerts (or an error)
  // leaves the section hidden, as does a day with nothing crossed.
  async function refreshAlerts() {
    let crossed = [];
    try {
      const u = await api("GET", "/admin/usage");
      crossed = (u.alerts && u.alerts.crossed_today) || [];
    } catch (e) {
      crossed = [];
    }
    renderAlerts(crossed);
  }
  const BUDGET_NAMES = { spend_per_day: "Spend per day", spend_per_month: "Spend per month", tokens_per_day: "Tokens per day" };
  function renderAlerts(list) {
    const box = $("alerts");
    box.hidden = list.length === 0;
    if (box.hidden) { box.replaceChildren(); return; }
    const figure = (a, x) => a.budget === "tokens_per_day" ? compact(x) : money(x);
    const head = el("tr", {}, el("th", { text: "Scope" }), el("th", { text: "Budget" }), el("th", { text: "Period" }),
      el("th", { text: "Threshold" }), el("th", { text: "Used when crossed" }), el("th", { text: "Crossed" }));
    const rows = list.map((a) => {
      const who = a.scope === "key" ? "key " + a.team + "/" + a.key : "team " + a.team;
      return el("tr", { "data-alert": (a.scope === "key" ? a.team + "/" + a.key : a.team) + " " + a.budget + " " + a.threshold },
        el("td", { text: who }), el("td", { text: BUDGET_NAMES[a.budget] || a.budget }), el("td", { text: a.period }),
        el("td", { class: "num", text: a.threshold + "%" }),
        el("td", { class: "num", text: figure(a, a.used) + " of " + figure(a, a.limit) + (a.limit > 0 ? " (" + Math.round((a.used / a.limit) * 100) + "%)" : "") }),
        el("td", { text: when(a.time) }));
    });
    box.replaceChildren(el("h2", { text: "Budget alerts today" }),
      el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows))));
  }
  // ---- end issue 28: alerts ----
