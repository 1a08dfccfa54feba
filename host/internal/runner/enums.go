package runner

import "fmt"

// The runner's choices are typed: the host maps its config strings to them
// once (Parse*), and the zero value of each is the default.

// Guarantee is the delivery guarantee of every processor of a runner.
type Guarantee uint8

const (
	// AtLeastOnce (default): a commit point flushes the outputs, applies the
	// state and then commits the input offsets; a crash in between
	// processes records again.
	AtLeastOnce Guarantee = iota
	// ExactlyOnce makes every commit point one Kafka transaction holding
	// the outputs, changelog records, dead letters and input offsets of
	// the work since the last one (I2).
	ExactlyOnce
)

var guaranteeNames = [...]string{AtLeastOnce: "at_least_once", ExactlyOnce: "exactly_once"}

// String is the guarantee's config name ("at_least_once", "exactly_once").
func (g Guarantee) String() string { return enumName(guaranteeNames[:], int(g), "guarantee") }

// ParseGuarantee parses a config name: "at_least_once" or "exactly_once".
func ParseGuarantee(s string) (Guarantee, error) {
	return parseEnum[Guarantee](guaranteeNames[:], s, "guarantee")
}

// ErrorPolicy is what a failed record (trap, timeout, memory limit, ABI
// misuse, plugin error) does to its task.
type ErrorPolicy uint8

const (
	// Fail (default) stops the task at the record: its offset is never
	// committed past it until the task moves or a rollback takes it back.
	Fail ErrorPolicy = iota
	// Skip counts the record as processed without its effects.
	Skip
	// DeadLetter produces the record, with headers saying why it failed,
	// to the processor's dead-letter topic, in the same commit point.
	DeadLetter
)

var errorPolicyNames = [...]string{Fail: "fail", Skip: "skip", DeadLetter: "dead_letter"}

// String is the policy's config name ("fail", "skip", "dead_letter").
func (p ErrorPolicy) String() string { return enumName(errorPolicyNames[:], int(p), "error policy") }

// ParseErrorPolicy parses a config name: "fail", "skip" or "dead_letter".
func ParseErrorPolicy(s string) (ErrorPolicy, error) {
	return parseEnum[ErrorPolicy](errorPolicyNames[:], s, "error policy")
}

// StartOffset is where a partition with no committed offset starts.
type StartOffset uint8

const (
	// Earliest (default): the partition's log start.
	Earliest StartOffset = iota
	// Latest: the partition's end; records already in it are not processed.
	Latest
)

var startOffsetNames = [...]string{Earliest: "earliest", Latest: "latest"}

// String is the start offset's config name ("earliest", "latest").
func (s StartOffset) String() string { return enumName(startOffsetNames[:], int(s), "start offset") }

// ParseStartOffset parses a config name: "earliest" or "latest".
func ParseStartOffset(s string) (StartOffset, error) {
	return parseEnum[StartOffset](startOffsetNames[:], s, "start offset")
}

// GroupProtocol is the consumer group protocol.
type GroupProtocol uint8

const (
	// ProtocolAuto (default) uses the KIP-848 "consumer" protocol when every
	// broker supports it and the classic one otherwise.
	ProtocolAuto GroupProtocol = iota
	// ProtocolConsumer is KIP-848: the broker assigns partitions and
	// rebalances are incremental, with no group-wide join barrier: a dead
	// member's partitions move after its session times out while every
	// other member keeps working and committing.
	ProtocolConsumer
	// ProtocolClassic is the JoinGroup/SyncGroup protocol with the
	// cooperative-sticky balancer. Every rebalance is a barrier: members
	// rejoin and wait, up to the session timeout, for a member that died.
	ProtocolClassic
)

var groupProtocolNames = [...]string{ProtocolAuto: "auto", ProtocolConsumer: "consumer", ProtocolClassic: "classic"}

// String is the protocol's config name ("auto", "consumer", "classic").
func (p GroupProtocol) String() string {
	return enumName(groupProtocolNames[:], int(p), "group protocol")
}

// ParseGroupProtocol parses a config name: "auto", "consumer" or "classic".
func ParseGroupProtocol(s string) (GroupProtocol, error) {
	return parseEnum[GroupProtocol](groupProtocolNames[:], s, "group protocol")
}

func enumName(names []string, i int, what string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", what, i)
}

// parseEnum returns the value whose name is s; its error names s and the
// accepted names.
func parseEnum[E ~uint8](names []string, s, what string) (E, error) {
	for i, n := range names {
		if n == s {
			return E(i), nil
		}
	}
	want := ""
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			want += " or "
		default:
			want += ", "
		}
		want += n
	}
	return 0, fmt.Errorf("runner: %s %q: want %s", what, s, want)
}
