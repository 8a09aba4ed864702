// Times and durations as the page shows them: local wall-clock time, durations in s, min and h.

/** An ISO time (or milliseconds) as the local time of day; '—' when there is none. */
export const time = (when) => (when ? new Date(when).toLocaleTimeString([], { hour12: false }) : '—');

/** From start to stop (or to now, while it runs); '—' before it started. */
export function duration(start, stop) {
  if (!start) return '—';
  const seconds = ((stop ? new Date(stop) : new Date()) - new Date(start)) / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 60 ? `${minutes} min ${Math.round(seconds % 60)} s` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}
