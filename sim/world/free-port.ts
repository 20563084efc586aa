// A free TCP port on the loopback, for a server a test or a bench starts of its own.
import * as net from "node:net";

/** A port nothing listens on now (the OS's pick, released before it is returned). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
