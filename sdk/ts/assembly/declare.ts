// Outputs and stores by name, resolved to the host's indices once per
// instance. The ones a plugin makes while it starts (at its top level,
// which runs in _initialize, or in its onInit hook) are declared: the SDK
// resolves them when the instance starts, before and after the hook, so a
// deployment whose config lacks one fails to start (and `wasmstream
// validate` says so), naming every missing name, instead of failing
// records at run time. A handle made later is resolved on first use.

import { Errno } from "./abi";
import { started } from "./call";
import { hostFail } from "./errors";
import { host_output_index, host_store_index } from "./host";

/** An output or a store: a name the processor's config declares. */
export class Handle {
  /** The name in the processor's config (outputs: or stores:). */
  readonly name: string;
  /** Whether this is a store (or table) rather than an output. */
  readonly isStore: bool;
  private nameBytes: ArrayBuffer;
  // The resolved index (>= 0), or -1; and an answer that is final (ENONAME).
  protected idx: i32 = -1;
  private final: Errno = Errno.OK;

  constructor(name: string, isStore: bool) {
    this.name = name;
    this.isStore = isStore;
    this.nameBytes = String.UTF8.encode(name);
    if (!started) declared.push(this);
  }

  /** The import that resolves this kind of handle. */
  get call(): string {
    return this.isStore ? "store_index" : "output_index";
  }

  /** The index, or -errno without recording a failure. Declarations do not change during an instance's life, so ENONAME is kept. */
  resolve(): i32 {
    if (this.idx >= 0) return this.idx;
    if (this.final != Errno.OK) return -<i32>this.final;
    const p = changetype<usize>(this.nameBytes);
    const n = <u32>this.nameBytes.byteLength;
    const r = this.isStore ? host_store_index(p, n) : host_output_index(p, n);
    if (r >= 0) this.idx = r;
    else if (r == -<i32>Errno.NONAME) this.final = Errno.NONAME;
    return r;
  }

  /** The index, or -errno after recording the failure of the call in progress. */
  index(): i32 {
    const r = this.resolve();
    if (r < 0) hostFail(this.call, this.name, <Errno>-r);
    return r;
  }

  /**
   * Resolves the handle now and returns Errno.OK, or the errno (NONAME: the
   * processor does not declare it), which also fails the call in progress
   * (takeError to handle it).
   */
  check(): Errno {
    const r = this.index();
    return r < 0 ? <Errno>-r : Errno.OK;
  }
}

/** The handles made while the plugin starts. */
const declared = new Array<Handle>();

/**
 * Resolves the declared handles, and returns "" or the message that fails
 * the start: every name the processor does not declare (outputs, then
 * stores, each once, sorted), worded as in every SDK; or another resolution
 * error.
 */
export function resolveDeclared(): string {
  const missing = new Array<string>();
  for (let i = 0; i < declared.length; i++) {
    const h = declared[i];
    const r = h.resolve();
    if (r >= 0) continue;
    if (r != -<i32>Errno.NONAME) {
      hostFail(h.call, h.name, <Errno>-r);
      return "";
    }
    const m = (h.isStore ? "store \"" : "output \"") + h.name + "\"";
    if (!missing.includes(m)) missing.push(m);
  }
  if (missing.length == 0) return "";
  missing.sort((a: string, b: string): i32 => (a < b ? -1 : a > b ? 1 : 0));
  return "sdk: not declared by the processor (add to its outputs or stores in the pipeline config): " + missing.join(", ");
}
