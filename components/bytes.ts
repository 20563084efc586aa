// Byte counts for people: the providers' progress lines and the CLI's summary print sizes the
// same way, so a size in a log line and in `sparkform status` read alike.

/** Bytes in binary units, one decimal: "512 B", "655.9 KiB", "1.2 GiB" (rates round to whole bytes). */
export function human(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${Math.round(v)} B` : `${v.toFixed(1)} ${units[i]}`;
}
