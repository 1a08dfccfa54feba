package runner

import "errors"

// FailureKind says why a record failed, for metrics and the dead-letter
// header HeaderErrorKind. The labels are a fixed table: dashboards and
// consumers of dead letters match on them.
type FailureKind uint8

const (
	// FailureError is any failure of unknown kind.
	FailureError FailureKind = iota
	// FailureTrap: the plugin trapped or exited.
	FailureTrap
	// FailureTimeout: the record ran past its time limit.
	FailureTimeout
	// FailureMemoryLimit: the plugin failed after a refused memory.grow.
	FailureMemoryLimit
	// FailureABIMisuse: the plugin broke the ABI (a bad pointer, an unknown
	// output or status).
	FailureABIMisuse
	// FailurePluginFailed: the plugin reported the failure itself.
	FailurePluginFailed
	// FailureHostFailed: the host failed while serving the plugin.
	FailureHostFailed
	// FailureInstanceLost: no instance could run the record.
	FailureInstanceLost
	// FailureStackLimit: the plugin's calls went past its stack limit.
	FailureStackLimit
	// FailureLimitExceeded: the record asked the host to stage more than
	// its per-record limits allow (emits, emitted bytes, state bytes),
	// emitted a record its output cannot take, or wrote a state entry its
	// changelog cannot take.
	FailureLimitExceeded
	// FailureRefused: the broker refused a record the call produced (its
	// size, timestamp or content; refusal.go), found on a former pass.
	FailureRefused

	numFailureKinds
)

// failureLabels are the label values; they never change.
var failureLabels = [numFailureKinds]string{
	FailureError:         "error",
	FailureTrap:          "trap",
	FailureTimeout:       "timeout",
	FailureMemoryLimit:   "memory_limit",
	FailureABIMisuse:     "abi_misuse",
	FailurePluginFailed:  "plugin_failed",
	FailureHostFailed:    "host_failed",
	FailureInstanceLost:  "instance_lost",
	FailureStackLimit:    "stack_limit",
	FailureLimitExceeded: "limit_exceeded",
	FailureRefused:       "refused",
}

// String is the kind's label, such as "memory_limit".
func (k FailureKind) String() string {
	if k < numFailureKinds {
		return failureLabels[k]
	}
	return failureLabels[FailureError]
}

// KindError is the error a Processor returns for a failed record whose kind
// it knows. Its message is Err's.
type KindError struct {
	Kind FailureKind
	Err  error
}

func (e *KindError) Error() string { return e.Err.Error() }
func (e *KindError) Unwrap() error { return e.Err }

// failureKind is the kind of a failed record's error: the first KindError's
// in its chain, FailureError without one.
func failureKind(err error) FailureKind {
	if ke, ok := errors.AsType[*KindError](err); ok && ke.Kind < numFailureKinds {
		return ke.Kind
	}
	return FailureError
}
