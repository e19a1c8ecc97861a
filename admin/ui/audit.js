  // issue 28: audit. The audit log, newest first: each refresh reads the newest page and
  // puts what is new on top; "Older entries" reads on down the log.
  const auditView = (function () {
    const PAGE = 20;
    let entries = [];
    let next = null;
    function reset() {
      entries = [];
      next = null;
      $("audit-rows").replaceChildren(el("div", { class: "empty", text: "Loading…" }));
      $("audit-more").hidden = true;
    }
    function describe(e) {
      const parts = Object.entries(e.details || {}).map(([k, v]) => k + "=" + v);
      if (e.changed && e.changed.length) parts.push("changed: " + e.changed.join(", ") + (e.changed_more ? " and " + e.changed_more + " more" : ""));
      return parts.join(" · ");
    }
    function render() {
      if (!entries.length) {
        $("audit-rows").replaceChildren(el("div", { class: "empty", text: "No admin actions recorded yet." }));
      } else {
        const head = el("tr", {}, ...["Time (UTC)", "Actor", "Action", "Target", "Details"].map((h) => el("th", { text: h })));
        const rows = entries.map((e) => el("tr", { "data-audit-id": e.id, "data-action": e.action, "data-target": e.target },
          el("td", { text: (e.time || "").slice(0, 19).replace("T", " ") }),
          el("td", { class: "muted", text: e.actor }),
          el("td", { text: e.action }),
          el("td", { text: e.target }),
          el("td", { class: "changed muted", text: describe(e) })));
        $("audit-rows").replaceChildren(el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
      }
      $("audit-more").hidden = !next;
    }
    async function load(before) {
      try {
        return await api("GET", "/admin/audit?limit=" + PAGE + (before ? "&before=" + encodeURIComponent(before) : ""));
      } catch (e) {
        if (e instanceof AuthError) { showSignin(e.message); return null; }
        $("audit-rows").replaceChildren(el("div", { class: "empty", text: "The audit log could not be read: " + e.message }));
        return null;
      }
    }
    async function refresh() {
      const page = await load("");
      if (!page) return;
      if (!entries.length) {
        entries = page.entries;
        next = page.next_before;
      } else {
        const top = entries[0].id;
        const fresh = page.entries.filter((e) => e.id > top);
        // More new entries than one page: start again from the newest rather than leave a hole.
        if (fresh.length === page.entries.length) { entries = page.entries; next = page.next_before; } else entries = fresh.concat(entries);
      }
      render();
    }
    $("audit-more").addEventListener("click", async () => {
      if (!next) return;
      const page = await load(next);
      if (!page) return;
      entries = entries.concat(page.entries);
      next = page.next_before;
      render();
    });
    return { refresh, reset };
  })();
  // /issue 28: audit
