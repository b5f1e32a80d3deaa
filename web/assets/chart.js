// The throughput-over-time chart: an inline SVG step chart of the rate
// between successive {time (ms), bytes} samples.

import { h, s, rate, duration } from './ui.js';

const W = 640, H = 200, left = 84, right = 12, top = 12, bottom = 26;

// nice rounds v up to 1, 2 or 5 times a power of ten of its binary
// unit (KiB, MiB, ...), so that the axis reads 2 MiB/s, not 1.9 MiB/s.
function nice(v) {
  const unit = 1024 ** Math.max(0, Math.floor(Math.log2(v) / 10));
  const p = 10 ** Math.floor(Math.log10(v / unit));
  return [1, 2, 5, 10].map((m) => m * p * unit).find((c) => c >= v);
}

export function chart(points) {
  const segs = [];
  for (let i = 1; i < points.length; i++) {
    const dt = (points[i].time - points[i - 1].time) / 1000;
    if (dt > 0) segs.push({ from: points[i - 1].time, to: points[i].time, rate: Math.max(0, points[i].bytes - points[i - 1].bytes) / dt });
  }
  if (!segs.length) return h('p', { class: 'muted', text: 'No throughput measured yet.' });
  const t0 = points[0].time;
  const span = points.at(-1).time - t0;
  const peak = Math.max(...segs.map((g) => g.rate));
  const ymax = nice(peak || 1);
  const x = (t) => left + (t - t0) / span * (W - left - right);
  const y = (r) => top + (1 - r / ymax) * (H - top - bottom);
  const line = segs.map((g, i) => `${i ? 'L' : 'M'}${x(g.from).toFixed(1)} ${y(g.rate).toFixed(1)}H${x(g.to).toFixed(1)}`).join('');
  const area = `M${x(t0)} ${y(0)}` + line.replace(/^M/, 'L') + `L${x(t0 + span)} ${y(0)}Z`;
  const average = (points.at(-1).bytes - points[0].bytes) / (span / 1000);
  const label = `Throughput over ${duration(span / 1000)}: peak ${rate(peak)}, average ${rate(average)}`;
  return s('svg', { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label },
    s('title', { text: label }),
    [0, ymax / 2, ymax].map((v) => [
      s('line', { class: 'grid', x1: left, x2: W - right, y1: y(v), y2: y(v) }),
      s('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end', text: rate(v) })]),
    s('path', { class: 'area', d: area }),
    s('path', { class: 'line', d: line }),
    s('text', { x: left, y: H - 6, text: '0 s' }),
    s('text', { x: W - right, y: H - 6, 'text-anchor': 'end', text: duration(span / 1000) }));
}
