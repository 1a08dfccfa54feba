/*
 * wasmstream_migrate.h: state migration between versions (abi/ABI.md
 * section 12). Link wasmstream_migrate.c into a processor that migrates
 * and define
 *
 *     int ws_migrate(ws_bytes from);
 *
 * The host calls it once per task, before this version's first call on the
 * task's stores, when they were last written by another version; from is
 * that version's ID ("<label>@<hash prefix>"), valid during the call. It
 * may use every store (ws_get, ws_put, ws_delete, ws_scan_*) as
 * ws_process may, but not emit or set timers (-WS_EPHASE). It returns
 * WS_OK, or fails like a record (ws_fail): nothing it wrote stays, and the
 * host rolls the processor back to the version before. It is bounded like
 * one record. A processor that does not link the file has no migration:
 * its stores pass to the next version as they are.
 */
#ifndef WASMSTREAM_MIGRATE_H
#define WASMSTREAM_MIGRATE_H

#include "wasmstream.h"

#define WS_MAX_MIGRATE_FROM 1024 /* abi.MaxMigrateFrom */

int ws_migrate(ws_bytes from);

/* The body of the wasmstream_migrate export (the fake host calls it). */
int32_t ws_sdk_migrate(uint32_t len);

#endif
