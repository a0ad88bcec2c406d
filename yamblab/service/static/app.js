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
  // the scorecard
  const boxValue = {};
  (d.advice || []).forEach((a) => { if (a.move.box) boxValue[a.move.box] = a; });
  const card = $("card");
  card.innerHTML = "";
  for (const [name, label] of Object.entries(INFO.boxes)) {
    const tr = card.insertRow();
    tr.insertCell().textContent = label;
    const td = tr.insertCell();
    td.className = "pts";
    if (name in p.card) {
      td.textContent = p.card[name];
      td.id = `score-${name}`;
    } else if (!p.done && boxValue[name]) {
      const b = document.createElement("button");
      b.id = `box-${name}`;
      b.textContent = "score";
      b.onclick = () => yMove({box: name});
      td.appendChild(b);
    }
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
      `(keeps ${fmt(d.loss_by_decision.keep)}, rows ${fmt(d.loss_by_decision.row)}); ` +
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
