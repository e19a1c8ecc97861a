  // ---- issue 45: teams form ----
  // Create a team, or edit a team's budgets, from the page: POST /admin/teams with
  // {"name","models","limits","end_user_limits"} (201), PATCH /admin/teams/{name} with a
  // merge patch of the fields changed (200). A team of the config file answers 409, whose
  // message is shown: it is changed in the file. An empty field sends nothing on create and
  // null (no limit) on edit.
  const TEAM_LIMITS = [
    ["requests_per_minute", "requests / min"], ["tokens_per_minute", "tokens / min"], ["concurrent_requests", "concurrent"],
    ["tokens_per_day", "tokens / day"], ["spend_per_day", "spend / day"], ["spend_per_month", "spend / month"],
  ];
  const END_USER_LIMITS = [["requests_per_minute", "end user req / min"], ["tokens_per_day", "end user tokens / day"], ["spend_per_day", "end user spend / day"]];
  const teamForm = (function () {
    const form = $("team-form");
    let editing = null; // the team being edited, as GET /admin/teams listed it; null: a new team
    const field = (group, name) => form.querySelector(`[data-group="${group}"][name="${name}"]`);
    function build() {
      const inputs = (group, list) => list.map(([name, label]) => el("label", { class: "field" }, el("span", { text: label }),
        el("input", { name, "data-group": group, type: "number", min: "0", step: name.startsWith("spend") ? "any" : "1", "aria-label": label })));
      $("team-limits").replaceChildren(...inputs("limits", TEAM_LIMITS),
        el("label", { class: "field" }, el("span", { text: "over budget" }),
          el("select", { name: "on_budget_exceeded", "data-group": "limits", "aria-label": "on budget exceeded" },
            el("option", { value: "", text: "default" }), el("option", { value: "refuse", text: "refuse" }), el("option", { value: "clamp", text: "clamp" }))));
      $("team-end-user").replaceChildren(...inputs("end_user_limits", END_USER_LIMITS));
    }
    function open(team) {
      editing = team || null;
      form.reset();
      $("team-form-error").textContent = "";
      $("team-name").disabled = !!editing;
      $("team-form-title").textContent = editing ? "Edit team " + editing.name : "New team";
      $("team-submit").textContent = editing ? "Save budgets" : "Create team";
      if (editing) {
        $("team-name").value = editing.name;
        $("team-models").value = (editing.models || []).join(", ");
        for (const [group, list] of [["limits", TEAM_LIMITS], ["end_user_limits", END_USER_LIMITS]]) {
          const have = editing[group] || {};
          for (const [name] of list) if (have[name]) field(group, name).value = String(have[name]);
        }
        field("limits", "on_budget_exceeded").value = (editing.limits && editing.limits.on_budget_exceeded) || "";
      }
      $("team-editor").hidden = false;
      (editing ? form.querySelector("input[data-group=limits]") : $("team-name")).focus();
    }
    // read is the form's fields as the API's objects: on create, only what was filled in;
    // on edit, what differs from the team as listed (null clears a limit).
    function read() {
      const out = {};
      for (const [group, list] of [["limits", TEAM_LIMITS], ["end_user_limits", END_USER_LIMITS]]) {
        const obj = {};
        const have = (editing && editing[group]) || {};
        for (const [name] of list) {
          const raw = field(group, name).value.trim();
          const v = raw === "" ? null : Number(raw);
          if (editing ? (v || 0) !== (have[name] || 0) : v !== null) obj[name] = v;
        }
        if (group === "limits") {
          const action = field("limits", "on_budget_exceeded").value;
          if (editing ? action !== ((have.on_budget_exceeded) || "") : action) obj.on_budget_exceeded = action || null;
        }
        if (Object.keys(obj).length) out[group] = obj;
      }
      const models = $("team-models").value.split(",").map((m) => m.trim()).filter(Boolean);
      if (editing ? models.join(",") !== (editing.models || []).join(",") : models.length) out.models = models;
      return out;
    }
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      $("team-form-error").textContent = "";
      const body = read();
      try {
        if (editing) {
          if (Object.keys(body).length) await api("PATCH", "/admin/teams/" + encodeURIComponent(editing.name), body);
        } else {
          body.name = $("team-name").value.trim();
          await api("POST", "/admin/teams", body);
        }
        $("team-editor").hidden = true;
        editing = null;
        await refresh();
      } catch (e) {
        if (e instanceof AuthError) { showSignin(e.message); return; }
        $("team-form-error").textContent = e.message;
      }
    });
    $("team-cancel").addEventListener("click", () => { $("team-editor").hidden = true; editing = null; });
    $("team-new").addEventListener("click", () => open(null));
    build();
    return { open };
  })();
  // ---- /issue 45: teams form ----
