/**
 * The whiteboard's web page: a canvas to draw on (each stroke is sent when
 * the pointer lifts) that shows every stroke the replica applies, pushed
 * over server-sent events (`/events`).
 *
 * @module
 */

/** The page, for replica `id`. */
export function pageHtml(id: string): string {
  const safe = id.replace(/[^A-Za-z0-9_.-]/g, "");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Rafter whiteboard (${safe})</title>
<style>
  body { font: 14px system-ui, sans-serif; margin: 16px; }
  canvas { border: 1px solid #999; touch-action: none; background: #fff; }
  #status { color: #555; }
</style>
</head>
<body>
<h1>Whiteboard</h1>
<p>Replica <b id="replica">${safe}</b> · <span id="count">0</span> strokes ·
  <span id="status">connecting</span>
  <select id="color"><option>#222</option><option>#d00</option><option>#06c</option><option>#090</option></select>
  <button id="clear">Clear</button></p>
<canvas id="board" width="800" height="500"></canvas>
<script>
const canvas = document.getElementById("board");
const ctx = canvas.getContext("2d");
let strokes = [];
function draw(stroke) {
  ctx.strokeStyle = stroke.color;
  ctx.lineWidth = 3;
  ctx.beginPath();
  stroke.points.forEach(([x, y], i) => i === 0 ? ctx.moveTo(x, y) : ctx.lineTo(x, y));
  if (stroke.points.length === 1) ctx.lineTo(stroke.points[0][0] + 1, stroke.points[0][1]);
  ctx.stroke();
}
function redraw() {
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  strokes.forEach(draw);
  document.getElementById("count").textContent = String(strokes.length);
  document.body.dataset.strokes = String(strokes.length);
  document.body.dataset.seqs = strokes.map((s) => s.seq).join(",");
}
const events = new EventSource("/events");
events.onopen = () => document.getElementById("status").textContent = "live";
events.onerror = () => document.getElementById("status").textContent = "reconnecting";
events.addEventListener("reset", (e) => { strokes = JSON.parse(e.data); redraw(); });
events.addEventListener("stroke", (e) => {
  const stroke = JSON.parse(e.data);
  if (!strokes.some((s) => s.seq === stroke.seq)) strokes.push(stroke);
  redraw();
});
events.addEventListener("clear", () => { strokes = []; redraw(); });
let current = null;
function at(e) {
  const r = canvas.getBoundingClientRect();
  return [Math.round(e.clientX - r.left), Math.round(e.clientY - r.top)];
}
canvas.addEventListener("pointerdown", (e) => { current = [at(e)]; canvas.setPointerCapture(e.pointerId); });
canvas.addEventListener("pointermove", (e) => {
  if (current === null) return;
  current.push(at(e));
  ctx.strokeStyle = document.getElementById("color").value;
  ctx.lineWidth = 3;
  ctx.beginPath();
  ctx.moveTo(...current[current.length - 2]);
  ctx.lineTo(...current[current.length - 1]);
  ctx.stroke();
});
canvas.addEventListener("pointerup", async () => {
  if (current === null) return;
  const points = current;
  current = null;
  const color = document.getElementById("color").value;
  const requestId = crypto.randomUUID();
  // Retried (same requestId: applied once) while a replica elects a leader.
  for (let i = 0; i < 20; i++) {
    try {
      const r = await fetch("/stroke", { method: "POST", body: JSON.stringify({ points, color, requestId }) });
      if (r.ok) return;
    } catch { /* the replica is gone: the page reconnects */ }
    await new Promise((w) => setTimeout(w, 250));
  }
  document.getElementById("status").textContent = "a stroke was not saved";
});
document.getElementById("clear").addEventListener("click", () =>
  fetch("/clear", { method: "POST", body: JSON.stringify({ requestId: crypto.randomUUID() }) }));
</script>
</body>
</html>
`;
}
