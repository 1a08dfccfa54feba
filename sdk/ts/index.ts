// The wasmstream SDK for TypeScript (AssemblyScript). README.md has the
// overview; the contract is abi/ABI.md of the wasmstream repository.

export {
  Errno, errnoName, errnoText, NO_TIME,
  MAX_KEY_SIZE, MAX_VALUE_SIZE, MAX_RECORD_SIZE, MAX_HEADERS, MAX_LOG_SIZE, MAX_OPEN_CURSORS, MAX_TIMER_KEY_SIZE,
} from "./assembly/abi";
export { SdkError, fail, failed, takeError, lastError } from "./assembly/errors";
export {
  utf8, str, bytesEqual, bytesCompare, copyBytes, concat, getU64BE, putU64BE, u64BE, decimal, prefixEnd,
} from "./assembly/bytes";
export { Header, Record } from "./assembly/record";
export { Output, ANY_PARTITION } from "./assembly/output";
export { Store, Iterator } from "./assembly/store";
export { config, configString, Level, log, logDebug, logInfo, logWarn, logError } from "./assembly/config";
export { handle, onInit } from "./assembly/dispatch";
export { onMigrate } from "./assembly/migrate";
export {
  EVENT_TIME, PROCESSING_TIME, COMMIT, setTimer, cancelTimer, streamTime, wallTime, mark,
  Firing, Commit, onTimer, onCommit, kindName,
} from "./assembly/timer";
export {
  EmitMode, WINDOW_LATE_HEADER, Window, WindowResult, WindowSpec, Windows, countAggregate, mergeCounts, countOf,
} from "./assembly/window";
export { JoinKind, JOIN_LATE_HEADER, Side, JoinResult, JoinSpec, Join } from "./assembly/join";
