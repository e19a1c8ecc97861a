  // ---- the team cards' 30-day chart ----
  // nice rounds a chart's top up to 1, 2 or 5 times a power of ten, so its ticks are round.
  function nice(x) {
    if (x <= 0) return 0;
    const p = Math.pow(10, Math.floor(Math.log10(x)));
    for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
    return 10 * p;
  }
  // tick writes an axis figure in at most five characters (1.4k, 25k, 3.2M), so the axis
  // labels fit their margin.
  function tick(n) {
    if (n >= 1e9) return +(n / 1e9).toFixed(1) + "B";
    if (n >= 1e6) return +(n / 1e6).toFixed(1) + "M";
    if (n >= 1e3) return +(n / 1e3).toFixed(n >= 1e4 ? 0 : 1) + "k";
    return String(+n.toFixed(n < 10 ? 1 : 0));
  }
  // moneyTick writes a cost axis figure in two significant digits (€0.00005, €2.5, €1.3k).
  function moneyTick(x) {
    if (x >= 1000) return money(0).replace(/[\d.,\s]+/, "") + tick(x);
    try {
      return new Intl.NumberFormat("en-US", { style: "currency", currency, maximumSignificantDigits: 2 }).format(x);
    } catch (e) {
      return +x.toPrecision(2) + " " + currency;
    }
  }
  // chart draws tokens per day as bars and cost per day as a line, each on its own scale.
  function chart(days) {
    const W = 560, H = 170, L = 48, R = 72, T = 10, B = 24;
    const w = W - L - R, h = H - T - B;
    const maxTok = nice(Math.max(1, ...days.map((d) => d.tokens)));
    const maxCost = nice(Math.max(0, ...days.map((d) => d.cost)));
    const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "tokens and cost per day, last 30 days" });
    for (let i = 0; i <= 2; i++) {
      const y = T + h - (h * i) / 2;
      s.append(svg("line", { x1: L, x2: L + w, y1: y, y2: y, stroke: "#e3e6eb" }));
      s.append(svg("text", { x: L - 6, y: y + 4, "text-anchor": "end", "font-size": 11, fill: "#667085", text: tick((maxTok * i) / 2) }));
      if (maxCost > 0) s.append(svg("text", { x: L + w + 6, y: y + 4, "font-size": 11, fill: "#b5651d", text: moneyTick((maxCost * i) / 2) }));
    }
    const step = w / days.length;
    days.forEach((d, i) => {
      const bh = (d.tokens / maxTok) * h;
      const bar = svg("rect", { x: L + i * step + 1.5, y: T + h - bh, width: Math.max(step - 3, 1), height: bh, rx: 2, fill: "#2f6fde", opacity: 0.75 });
      bar.append(svg("title", { text: d.day + ": " + num(d.tokens) + " tokens, " + money(d.cost) }));
      s.append(bar);
    });
    if (maxCost > 0) {
      const pts = days.map((d, i) => `${(L + i * step + step / 2).toFixed(1)},${(T + h - (d.cost / maxCost) * h).toFixed(1)}`);
      s.append(svg("polyline", { points: pts.join(" "), fill: "none", stroke: "#d9822b", "stroke-width": 2, "stroke-linejoin": "round" }));
    }
    s.append(svg("text", { x: L, y: H - 6, "font-size": 11, fill: "#667085", text: days[0].day.slice(5) }));
    s.append(svg("text", { x: L + w, y: H - 6, "font-size": 11, fill: "#667085", "text-anchor": "end", text: "today" }));
    return s;
  }
