  // ---- the team cards' key tables ----
  function keyLimits(l) {
    const parts = [];
    if (l.requests_per_minute) parts.push(num(l.requests_per_minute) + " req/min");
    if (l.tokens_per_minute) parts.push(compact(l.tokens_per_minute) + " tok/min");
    if (l.concurrent_requests) parts.push(num(l.concurrent_requests) + " concurrent");
    if (l.tokens_per_day) parts.push(compact(l.tokens_per_day) + " tok/day");
    if (l.spend_per_day) parts.push(money(l.spend_per_day) + "/day");
    if (l.spend_per_month) parts.push(money(l.spend_per_month) + "/month");
    return parts.length ? parts.join(", ") : "—";
  }

  function keyTable(keys) {
    if (!keys.length) return el("div", { class: "empty", text: "No keys." });
    const head = el("tr", {}, ...["Name", "Source", "Models", "Limits", "Created", "Last used", "Expires", "Requests today", "Spend today", ""].map((h) => el("th", { text: h })));
    const rows = keys.map((k) => {
      let action = el("td");
      if (k.source === "api") {
        const b = el("button", { type: "button", class: "danger revoke", text: "Revoke" });
        let armed = null;
        b.addEventListener("click", async () => {
          if (!armed) {
            b.classList.add("armed");
            b.textContent = "Confirm revoke";
            armed = setTimeout(() => { armed = null; b.classList.remove("armed"); b.textContent = "Revoke"; }, 4000);
            return;
          }
          clearTimeout(armed);
          b.disabled = true;
          try {
            await api("DELETE", "/admin/keys/" + encodeURIComponent(k.id));
            await refresh();
          } catch (e) {
            if (e instanceof AuthError) { showSignin(e.message); return; }
            b.disabled = false;
            b.textContent = "Failed: retry";
          }
        });
        action = el("td", {}, b);
      }
      const u = k.usage || {};
      return el("tr", { "data-key": k.name, "data-id": k.id },
        el("td", { text: k.name }),
        el("td", { class: "src" }, el("span", { class: k.source, text: k.source })),
        el("td", { class: "models", text: k.models && k.models.length ? k.models.join(", ") : "team's" }),
        el("td", { class: "muted", text: keyLimits(k.limits || {}) }),
        el("td", { text: k.created_at ? k.created_at.slice(0, 10) : "config" }),
        el("td", { text: when(k.last_used_at) }),
        el("td", { text: k.expires_at ? k.expires_at.slice(0, 10) : "never" }),
        el("td", { class: "num", text: num(u.day_requests) }),
        el("td", { class: "num", text: money(u.spend_day) }),
        action);
    });
    return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
  }
