// yamblab browser client: no build step. The server keeps no game state: a game is its dice
// seed plus the moves so far, replayed and graded by the server at every request.
"use strict";

const $ = (id) => document.getElementById(id);
const fmt = (x) => Number(x).toFixed(2);
let INFO = null;

async function api(path, body) {
  const r = await fetch(path, body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  const j = await r.json();
  if (!r.ok) {
    const msg = typeof j.detail === "string" ? j.detail : JSON.stringify(j.detail);
    throw new Error(msg);
  }
  return j;
}

function gradeText(m) {
  return m.loss < 1e-9 ? `${m.label}: perfect`
    : `${m.label}: gave away ${fmt(m.loss)} points (best: ${m.best})`;
}

// ------------------------------------------------------------------ Yahtzee scoring
// What each open box would score with the dice showing, stated as yamblab/games/yahtzee/rules.py
// states it (legal_boxes, base_score, joker_active); tests/test_serve_browser.py checks that the
// two agree on every roll, under every joker rule, with the Yahtzee box open, at 0 and at 50.
const YBOXES = ["ones", "twos", "threes", "fours", "fives", "sixes", "three_of_a_kind", "four_of_a_kind",
  "full_house", "small_straight", "large_straight", "yahtzee", "chance"];
const UPPER_BONUS_AT = 63, UPPER_BONUS = 35, YAHTZEE_BONUS = 100;

// a variant's name as the server writes it ("forced", "free,no-upper-bonus", …)
function yRulesOf(name) {
  const words = String(name).split(",").map((w) => w.trim());
  return {joker: ["forced", "free", "priority", "none"].find((j) => words.includes(j)) || "forced",
    upperBonus: !words.includes("no-upper-bonus"), yahtzeeBonus: !words.includes("no-yahtzee-bonus")};
}

// {points: {open box: points, or null where the joker rule forbids it}, yahtzeeBonus: 100 or 0}
function yPoints(rulesName, card, dice) {
  const rules = yRulesOf(rulesName);
  const h = [0, 0, 0, 0, 0, 0];
  dice.forEach((f) => { h[f - 1] += 1; });
  const sum = dice.reduce((s, f) => s + f, 0);
  const most = Math.max(...h);
  const face = h.indexOf(5);                    // the face of a Yahtzee, or -1
  const run = (lo, hi) => h.slice(lo - 1, hi).every((c) => c > 0);
  const open = YBOXES.filter((b) => !(b in card));
  const yBox = !("yahtzee" in card) ? "open" : card.yahtzee === 50 ? "fifty" : "zero";
  const joker = face >= 0 && yBox !== "open" && rules.joker !== "none";
  const among = (group) => open.filter((b) => group.includes(b));
  let legal = open;
  if (joker && rules.joker !== "free") {
    if (open.includes(YBOXES[face])) legal = [YBOXES[face]];
    else if (rules.joker === "forced") legal = among(YBOXES.slice(6)).length ? among(YBOXES.slice(6)) : open;
    else legal = [["three_of_a_kind", "four_of_a_kind"], ["chance", "full_house", "small_straight", "large_straight"]]
      .map(among).find((g) => g.length) || open;     // priority
  }
  // a joker Yahtzee scores Full House and the straights at full value
  const full = joker && (rules.joker !== "free" || !open.includes(YBOXES[face]));
  const score = {three_of_a_kind: most >= 3 ? sum : 0, four_of_a_kind: most >= 4 ? sum : 0,
    full_house: (h.includes(3) && h.includes(2)) || full ? 25 : 0,
    small_straight: run(1, 4) || run(2, 5) || run(3, 6) || full ? 30 : 0,
    large_straight: run(1, 5) || run(2, 6) || full ? 40 : 0, yahtzee: face >= 0 ? 50 : 0, chance: sum};
  YBOXES.slice(0, 6).forEach((b, f) => { score[b] = (f + 1) * h[f]; });
  const points = {};
  for (const b of open) points[b] = legal.includes(b) ? score[b] : null;
  return {points, yahtzeeBonus: face >= 0 && yBox === "fifty" && rules.yahtzeeBonus ? YAHTZEE_BONUS : 0};
}

// the upper section: the sum of the upper boxes filled so far, and where the 35-point bonus stands
function yUpper(rulesName, card) {
  const upper = YBOXES.slice(0, 6);
  const subtotal = upper.reduce((s, b) => s + (card[b] || 0), 0);
  const best = subtotal + upper.reduce((s, b, f) => s + (b in card ? 0 : 5 * (f + 1)), 0);
  if (!yRulesOf(rulesName).upperBonus) return {subtotal, label: "Bonus", bonus: "not in these rules"};
  const bonus = subtotal >= UPPER_BONUS_AT ? String(UPPER_BONUS)
    : best < UPPER_BONUS_AT ? "out of reach" : `${UPPER_BONUS_AT - subtotal} to go`;
  return {subtotal, label: `Bonus (${UPPER_BONUS} at ${UPPER_BONUS_AT})`, bonus};
}

function yUpperRows(table, rulesName, card, prefix, cols) {
  const u = yUpper(rulesName, card);
  for (const [label, text, id] of [["Upper subtotal", u.subtotal, "subtotal"], [u.label, u.bonus, "bonus"]]) {
    const tr = table.insertRow();
    tr.className = "sum";
    tr.insertCell().textContent = label;
    const td = tr.insertCell();
    td.className = "pts";
    td.id = prefix + "upper-" + id;
    td.textContent = text;
    for (let c = 2; c < cols; c++) tr.insertCell();
  }
}

// ------------------------------------------------------------------ Yahtzee
const Y = {seed: 1, moves: [], held: new Set(), data: null, agent: null, reveal: false, busy: false};

function showError(where, err) { where.textContent = "error: " + err.message; where.className = "grade lost"; }

async function yRefresh() {
  Y.busy = true;
  document.body.dataset.busy = "1";
  try {
    Y.data = await api("/api/yahtzee/replay", {rules: $("rules").value, seed: Y.seed, moves: Y.moves, advice: true});
    yRender();
  } catch (e) {
    Y.moves.pop();
    showError($("last-grade"), e);
  } finally {
    Y.busy = false;
    document.body.dataset.busy = "0";
  }
}

function yMove(move) {
  if (Y.busy || !Y.data || Y.data.position.done) return;
  Y.moves.push(move);
  Y.held = new Set();
  yRefresh();
}

function yRender() {
  const d = Y.data, p = d.position;
  $("turn").textContent = p.turn;
  $("rolls-left").textContent = p.rolls_left;
  $("total").textContent = p.total;
  $("loss-total").textContent = fmt(d.loss_total);
  const dice = $("dice");
  dice.innerHTML = "";
  p.dice.forEach((f, i) => {
    const b = document.createElement("button");
    b.className = "die" + (Y.held.has(i + 1) ? " held" : "");
    b.id = `die-${i + 1}`;
    b.textContent = f;
    b.disabled = p.done || p.rolls_left === 0;
    b.onclick = () => { Y.held.has(i + 1) ? Y.held.delete(i + 1) : Y.held.add(i + 1); yRender(); };
    dice.appendChild(b);
  });
  $("roll").disabled = p.done || p.rolls_left === 0;
  const last = d.moves[d.moves.length - 1];
  const g = $("last-grade");
  g.textContent = last ? gradeText(last) : "";
  g.className = "grade " + (last ? (last.loss < 1e-9 ? "perfect" : "lost") : "");
  const hint = $("hint");
  hint.hidden = !$("hints").checked || p.done;
  if (d.advice) hint.textContent = `oracle: ${d.advice[0].label} (expected final ${fmt(d.advice[0].expected_final)})`;
  // the scorecard: the points of each filled box; in each open box, what the dice showing would score
  const boxValue = {};
  (d.advice || []).forEach((a) => { if (a.move.box) boxValue[a.move.box] = a; });
  const now = p.done ? null : yPoints(d.rules, p.card, p.dice);
  const card = $("card");
  card.innerHTML = "";
  for (const [name, label] of Object.entries(INFO.boxes)) {
    const tr = card.insertRow();
    tr.insertCell().textContent = label;
    const td = tr.insertCell();
    td.className = "pts";
    const act = tr.insertCell();
    if (name in p.card) {
      td.textContent = p.card[name];
      td.id = `score-${name}`;
    } else if (now) {
      const v = now.points[name];
      td.id = `pts-${name}`;
      td.textContent = v === null ? "–" : v;
      td.className = "pts would" + (v ? "" : " nil");
      td.title = v === null ? "the joker rule does not allow this box for this Yahtzee"
        : "what the dice showing would score here";
      if (boxValue[name]) {
        const b = document.createElement("button");
        b.id = `box-${name}`;
        b.textContent = "score";
        b.onclick = () => yMove({box: name});
        act.appendChild(b);
      }
    }
    if (name === "sixes") yUpperRows(card, d.rules, p.card, "", 3);
  }
  if (yRulesOf(d.rules).yahtzeeBonus) {
    const tr = card.insertRow();
    tr.className = "sum";
    tr.insertCell().textContent = "Yahtzee bonus";
    const td = tr.insertCell();
    td.className = "pts";
    td.id = "yahtzee-bonus";
    td.textContent = p.yahtzee_bonuses ? 100 * p.yahtzee_bonuses : "";
    if (now && now.yahtzeeBonus) {
      const s = document.createElement("span");
      s.className = "would";
      s.id = "pts-yahtzee-bonus";
      s.textContent = ` +${now.yahtzeeBonus}`;
      s.title = "a further Yahtzee earns this bonus in whichever box it is scored";
      td.appendChild(s);
    }
    tr.insertCell();
  }
  const log = $("moves");
  log.innerHTML = "";
  d.moves.forEach((m) => {
    const li = document.createElement("li");
    li.textContent = `[${m.dice.join(" ")}] ${m.decision}: ${gradeText(m)}`;
    log.appendChild(li);
  });
  const fin = $("final");
  fin.hidden = !p.done;
  if (p.done) {
    $("final-score").textContent = p.total;
    $("final-loss").textContent = fmt(d.loss_total);
    $("final-optimal").textContent = fmt(d.optimal_expected);
    const t = $("final-by-decision");
    t.innerHTML = "<tr><th>decision</th><th>points given away</th></tr>";
    for (const [k, v] of Object.entries(d.loss_by_decision)) {
      const tr = t.insertRow();
      tr.insertCell().textContent = k;
      const c = tr.insertCell();
      c.textContent = fmt(v);
      c.id = "final-" + k.replace(" ", "-");
    }
  }
  yRenderAgent();
}

async function yLoadAgent() {
  const name = $("agent").value;
  Y.agent = null;
  $("rival").hidden = !name;
  if (!name) return;
  $("agent-name").textContent = name;
  try {
    Y.agent = await api("/api/yahtzee/agent/game", {rules: $("rules").value, seed: Y.seed, agent: name});
  } catch (e) { showError($("agent-moves"), e); }
  yRenderAgent();
}

function yRenderAgent() {
  if (!Y.agent || !Y.data) return;
  // show the agent's game up to the turn the player has reached (or all of it)
  const turnsDone = Object.keys(Y.data.position.card).length;
  let boxes = 0, total = 0, loss = 0;
  const card = {};
  const log = $("agent-moves");
  log.innerHTML = "";
  for (const m of Y.agent.moves) {
    if (!Y.reveal && boxes >= turnsDone) break;
    loss += m.loss;
    const li = document.createElement("li");
    li.textContent = `[${m.dice.join(" ")}] ${gradeText(m)}`;
    log.appendChild(li);
    if (m.move.box) { boxes += 1; card[m.move.box] = true; }
  }
  const full = Y.reveal || boxes >= 13;
  // mid-game: the boxes scored so far (bonuses are added when the game ends)
  total = full ? Y.agent.position.total
    : Object.keys(card).reduce((s, k) => s + Y.agent.position.card[k], 0);
  $("agent-total").textContent = total;
  $("agent-loss").textContent = fmt(loss);
  const t = $("agent-card");
  t.innerHTML = "";
  for (const [name, label] of Object.entries(INFO.boxes)) {
    const tr = t.insertRow();
    tr.insertCell().textContent = label;
    const td = tr.insertCell();
    td.className = "pts";
    td.textContent = card[name] ? Y.agent.position.card[name] : "";
    if (name === "sixes") {
      const filled = {};
      for (const k of Object.keys(card)) filled[k] = Y.agent.position.card[k];
      yUpperRows(t, Y.agent.rules, filled, "agent-", 2);
    }
  }
}

function yNewGame() {
  Y.seed = Number($("seed").value) || 0;
  Y.moves = [];
  Y.held = new Set();
  Y.reveal = false;
  yRefresh().then(yLoadAgent);
}

// ------------------------------------------------------------------ Yamb
const M = {seed: 1, moves: [], held: new Set(), data: null, busy: false};

async function mRefresh() {
  M.busy = true;
  document.body.dataset.busy = "1";
  const [preset, column] = $("yamb-column").value.split("/");
  try {
    M.data = await api("/api/yamb/replay", {preset, column, seed: M.seed, moves: M.moves, advice: true});
    mRender();
  } catch (e) {
    M.moves.pop();
    showError($("yamb-grade"), e);
  } finally {
    M.busy = false;
    document.body.dataset.busy = "0";
  }
}

function mMove(move) {
  if (M.busy || !M.data || M.data.position.done) return;
  M.moves.push(move);
  M.held = new Set();
  mRefresh();
}

function mRender() {
  const d = M.data, p = d.position;
  $("yamb-turn").textContent = p.turn;
  $("yamb-roll").textContent = p.roll;
  $("yamb-rolls").textContent = p.rolls;
  $("yamb-total").textContent = p.total;
  $("yamb-loss").textContent = fmt(d.loss_total);
  const dice = $("yamb-dice");
  dice.innerHTML = "";
  p.dice.forEach((f, i) => {
    const b = document.createElement("button");
    b.className = "die" + (M.held.has(i + 1) ? " held" : "");
    b.id = `yamb-die-${i + 1}`;
    b.textContent = f;
    b.disabled = p.done || p.roll >= p.rolls;
    b.onclick = () => { M.held.has(i + 1) ? M.held.delete(i + 1) : M.held.add(i + 1); mRender(); };
    dice.appendChild(b);
  });
  $("yamb-reroll").disabled = p.done || p.roll >= p.rolls;
  const last = d.moves[d.moves.length - 1];
  const g = $("yamb-grade");
  g.textContent = last ? gradeText(last) : "";
  g.className = "grade " + (last ? (last.loss < 1e-9 ? "perfect" : "lost") : "");
  const hint = $("yamb-hint");
  hint.hidden = !$("yamb-hints").checked || p.done;
  if (d.advice) hint.textContent = `oracle: ${d.advice[0].label} (expected column total ${fmt(d.advice[0].expected_final)})`;
  const card = $("yamb-card");
  card.innerHTML = "";
  for (const row of d.rows) {
    const tr = card.insertRow();
    tr.insertCell().textContent = row;
    const td = tr.insertCell();
    td.className = "pts";
    if (row in p.scores) td.textContent = p.scores[row];
    else if (!p.done && (p.next_row === null || p.next_row === row)) {
      const b = document.createElement("button");
      b.id = `yamb-row-${row}`;
      b.textContent = "score";
      b.onclick = () => mMove({row});
      td.appendChild(b);
    }
  }
  const fin = $("yamb-final");
  fin.hidden = !p.done;
  if (p.done) {
    fin.textContent = `Column total ${p.total}; you gave away ${fmt(d.loss_total)} points ` +
      `(${Object.entries(d.loss_by_decision).map(([k, v]) => `${k} ${fmt(v)}`).join(", ")}); ` +
      `optimal play averages ${fmt(d.optimal_expected)}.`;
  }
}

function mNewGame() {
  M.seed = Number($("yamb-seed").value) || 0;
  M.moves = [];
  M.held = new Set();
  mRefresh();
}

// ------------------------------------------------------------------ start
async function start() {
  INFO = await api("/api/info");
  for (const r of Object.keys(INFO.rules)) $("rules").add(new Option(`${r} (optimal ${fmt(INFO.rules[r])})`, r));
  for (const a of INFO.agents) $("agent").add(new Option(a, a));
  for (const y of INFO.yamb) $("yamb-column").add(new Option(`${y.preset} ${y.column}`, `${y.preset}/${y.column}`));
  document.querySelectorAll(".tab").forEach((t) => t.onclick = () => {
    document.querySelectorAll(".tab").forEach((u) => u.classList.toggle("active", u === t));
    document.querySelectorAll(".panel").forEach((p) => p.hidden = p.id !== "panel-" + t.dataset.panel);
  });
  $("new-game").onclick = yNewGame;
  $("roll").onclick = () => yMove({hold: [...Y.held].sort()});
  $("hints").onchange = () => Y.data && yRender();
  $("agent").onchange = yLoadAgent;
  $("agent-reveal").onclick = () => { Y.reveal = true; yRenderAgent(); };
  $("rules").onchange = yNewGame;
  $("yamb-new").onclick = mNewGame;
  $("yamb-reroll").onclick = () => mMove({hold: [...M.held].sort()});
  $("yamb-hints").onchange = () => M.data && mRender();
  $("yamb-column").onchange = mNewGame;
  yNewGame();
  mNewGame();
  document.body.dataset.ready = "1";
}

start().catch((e) => { document.body.textContent = "cannot reach the yamblab server: " + e.message; });
