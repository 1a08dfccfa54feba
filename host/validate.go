package host

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/admin"
	"github.com/wasmstream/wasmstream/host/internal/engine"
)

// Validation is here, in one place: Validate for a whole config,
// ValidateKafka for what a Kafka tool needs of one. Each enum's values
// are its type's (enums.go); a file's bad values are refused as they are
// read, these checks catch a Config built in Go.

// Fetch size bounds: below minFetchBytes a fetch costs more in round trips
// than it carries; above maxFetchBytes it is more memory than any poll
// needs.
const (
	minFetchBytes = 4 << 10
	maxFetchBytes = 256 << 20
)

// The smallest compile budgets: below them no module compiles (the
// estimate's fixed parts, host/internal/engine/compilecost.go).
const (
	minCompileMemory  = 8 << 20
	minInstanceMemory = 1 << 20
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

// Validate checks the config and returns every problem found, each naming
// its field path. New calls it after ApplyDefaults.
func (c *Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &ConfigError{Path: path, Problem: fmt.Sprintf(format, args...)})
	}
	badEnum := func(path, problem string) {
		if problem != "" {
			bad(path, "%s", problem)
		}
	}
	errs = append(errs, c.appIDErrors()...)
	errs = append(errs, c.kafkaErrors()...)
	if c.Kafka.CommitInterval < 0 {
		bad("kafka.commit_interval", "must be positive")
	}
	if c.Kafka.CommitRecords < 0 {
		bad("kafka.commit_records", "must be positive")
	}
	if c.State.StandbyReplicas < 0 || c.State.StandbyReplicas > maxStandbyReplicas {
		bad("state.standby_replicas", "%d: must be 0 (no standbys) to %d", c.State.StandbyReplicas, maxStandbyReplicas)
	}
	if c.State.WriteTimeout < 0 {
		bad("state.write_timeout", "%s: must not be negative (0: the default, 10s)", c.State.WriteTimeout)
	}
	badEnum("guarantee", enumProblem(c.Guarantee, guarantees))
	if c.Kafka.TransactionTimeout < time.Second {
		bad("kafka.transaction_timeout", "%s is below 1s", c.Kafka.TransactionTimeout)
	}
	badEnum("kafka.group_protocol", enumProblem(c.Kafka.GroupProtocol, groupProtocols))
	badEnum("kafka.members", enumProblem(c.Kafka.Members, membersValues))
	if w, _ := c.Swap.CanaryWindow.Get(); w < 0 {
		bad("swap.canary_window", "must not be negative")
	}
	if c.Admin.Debug && c.Admin.Listen == "" {
		bad("admin.debug", "the debug endpoints are served on the admin endpoint: set admin.listen too")
	}
	if c.Query.Listen != "" {
		if _, err := admin.ListenAddress(c.Query.Listen); err != nil {
			bad("query.listen", "%v", err)
		}
		if _, port, _ := net.SplitHostPort(c.Query.Listen); c.Query.Listen == c.Admin.Listen && port != "0" {
			bad("query.listen", "%q is admin.listen too: the query endpoint has a listener of its own", c.Query.Listen)
		}
	}
	if c.Query.Advertise != "" {
		if u, err := url.Parse(c.Query.Advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad("query.advertise", "%q is not a base URL like http://10.0.0.7:9645", c.Query.Advertise)
		}
		if c.Query.Listen == "" {
			bad("query.advertise", "the query endpoint is off: set query.listen too")
		}
	}
	if c.Query.Token != "" && c.Query.Listen == "" {
		bad("query.token", "the query endpoint is off: set query.listen too")
	}
	if r, _ := c.Swap.MaxFailureRatio.Get(); r < 0 || r > 1 {
		bad("swap.max_failure_ratio", "%v must be between 0 and 1", r)
	}
	if c.Swap.MinRecords < 0 {
		bad("swap.min_records", "must be positive")
	}
	if c.Swap.ShadowFirst < 0 {
		bad("swap.shadow_first", "must not be negative")
	}
	if c.Runtime.MaxModuleSize < 1024 {
		bad("runtime.max_module_size", "%d bytes is too small", c.Runtime.MaxModuleSize)
	}
	if ml := c.Runtime.ModuleLimits; ml.CompileMemory < minCompileMemory {
		bad("runtime.module_limits.compile_memory", "%s is below %s, which compiling any module takes", ml.CompileMemory, ByteSize(minCompileMemory))
	}
	if ml := c.Runtime.ModuleLimits; ml.CompileTime < 0 {
		bad("runtime.module_limits.compile_time", "must not be negative")
	}
	if ml := c.Runtime.ModuleLimits; ml.InstanceMemory < minInstanceMemory {
		bad("runtime.module_limits.instance_memory", "%s is below %s, which any instance takes", ml.InstanceMemory, ByteSize(minInstanceMemory))
	}
	for _, f := range []struct {
		path string
		v    ByteSize
	}{{"kafka.fetch_max_partition_bytes", c.Kafka.FetchMaxPartitionBytes}, {"kafka.fetch_max_bytes", c.Kafka.FetchMaxBytes}} {
		if f.v < minFetchBytes || f.v > maxFetchBytes {
			bad(f.path, "%s is outside %s..%s", f.v, ByteSize(minFetchBytes), ByteSize(maxFetchBytes))
		}
	}
	if c.Kafka.FetchMaxBytes < c.Kafka.FetchMaxPartitionBytes {
		bad("kafka.fetch_max_bytes", "%s is below kafka.fetch_max_partition_bytes (%s)", c.Kafka.FetchMaxBytes, c.Kafka.FetchMaxPartitionBytes)
	}
	badEnum("kafka.start_offset", enumProblem(c.Kafka.StartOffset, startOffsets))
	if c.Kafka.TopicPartitions < 1 {
		bad("kafka.topic_partitions", "must be at least 1")
	}
	badEnum("log.level", enumProblem(LogLevel(strings.ToLower(string(c.Log.Level))), logLevels))
	badEnum("log.format", enumProblem(c.Log.Format, logFormats))
	if len(c.Processors) == 0 {
		bad("processors", "at least one processor is required")
	}
	names := map[string]int{}
	inputs := map[string]string{}
	stores := map[string]string{}
	for i, p := range c.Processors {
		at := fmt.Sprintf("processors[%d]", i)
		switch {
		case p.Name == "":
			bad(at+".name", "required")
		case !nameRE.MatchString(p.Name):
			bad(at+".name", "%q must be made of a-z A-Z 0-9 . _ -", p.Name)
		default:
			if j, dup := names[p.Name]; dup {
				bad(at+".name", "%q is already the name of processors[%d]", p.Name, j)
			}
			names[p.Name] = i
		}
		if p.Plugin == "" {
			bad(at+".plugin", "required (path to a .wasm module)")
		}
		if len(p.Inputs) == 0 {
			bad(at+".inputs", "at least one input topic is required")
		}
		for j, in := range p.Inputs {
			topic := c.inputTopic(in) // a repartition output's internal topic
			switch {
			case !nameRE.MatchString(in):
				bad(fmt.Sprintf("%s.inputs[%d]", at, j), "%q is not a valid topic name", in)
			case inputs[topic] != "" && topic != in:
				bad(fmt.Sprintf("%s.inputs[%d]", at, j), "repartition output %q is already the input of processor %q (one processor reads a repartition output)", in, inputs[topic])
			case inputs[topic] != "":
				bad(fmt.Sprintf("%s.inputs[%d]", at, j), "topic %q is already the input of processor %q", in, inputs[topic])
			default:
				inputs[topic] = p.Name
			}
		}
		for name, out := range p.Outputs {
			if !nameRE.MatchString(name) {
				bad(at+".outputs", "output name %q must be made of a-z A-Z 0-9 . _ -", name)
			}
			if !nameRE.MatchString(out.Topic) {
				bad(at+".outputs."+name, "%q is not a valid topic name", out.Topic)
			}
			badEnum(at+".outputs."+name+".emit", enumProblem(out.Emit, outputEmits))
		}
		for j, st := range p.Stores {
			at := fmt.Sprintf("%s.stores[%d]", at, j)
			switch {
			case !nameRE.MatchString(st):
				bad(at, "%q must be made of a-z A-Z 0-9 . _ -", st)
			case strings.HasPrefix(st, "_"):
				bad(at, "%q: store names starting with _ are the host's (each processor with stores has a time store, %s)", st, timeStoreName(p.Name))
			case stores[st] != "":
				bad(at, "store %q is already declared by processor %q (store names are unique in an app: they name changelog topics)", st, stores[st])
			default:
				stores[st] = p.Name
			}
		}
		for _, name := range sortedKeys(p.Tables) {
			at, topic := at+".tables."+name, p.Tables[name]
			_, isOutput := p.Outputs[name]
			switch {
			case !nameRE.MatchString(name):
				bad(at, "table name %q must be made of a-z A-Z 0-9 . _ -", name)
			case strings.HasPrefix(name, "_"):
				bad(at, "table name %q: names starting with _ are the host's", name)
			case slices.Contains(p.Stores, name):
				bad(at, "table name %q is also one of the processor's stores (the plugin finds both by name with store_index)", name)
			case isOutput || slices.Contains(p.Repartition, name):
				bad(at, "table name %q is also one of the processor's outputs", name)
			}
			if !nameRE.MatchString(topic) {
				bad(at, "%q is not a valid topic name", topic)
			}
		}
		for _, name := range sortedKeys(p.TaskTables) {
			at, topic := at+".task_tables."+name, p.TaskTables[name]
			_, isOutput := p.Outputs[name]
			_, isGlobal := p.Tables[name]
			switch {
			case !nameRE.MatchString(name):
				bad(at, "table name %q must be made of a-z A-Z 0-9 . _ -", name)
			case strings.HasPrefix(name, "_"):
				bad(at, "table name %q: names starting with _ are the host's", name)
			case slices.Contains(p.Stores, name) || isGlobal:
				bad(at, "table name %q is also one of the processor's stores or global tables (the plugin finds them by name with store_index)", name)
			case isOutput || slices.Contains(p.Repartition, name):
				bad(at, "table name %q is also one of the processor's outputs", name)
			}
			switch {
			case !nameRE.MatchString(topic):
				bad(at, "%q is not a valid topic name", topic)
			case inputs[topic] != "":
				bad(at, "topic %q is already the input of processor %q (a task table is read like an input: one processor reads it)", topic, inputs[topic])
			default:
				inputs[topic] = p.Name
			}
		}
		for st, e := range p.Expire {
			at := at + ".expire." + st
			switch {
			case !slices.Contains(p.Stores, st):
				bad(at, "%q is not one of the processor's stores %q", st, p.Stores)
			case e.After <= 0:
				bad(at+".after", "must be more than 0")
			default:
				badEnum(at+".clock", enumProblem(e.Clock, expiryClocks))
			}
		}
		badEnum(at+".on_error", enumProblem(p.OnError, errorPolicies))
		if p.StateCache != "" {
			var cs CacheSize
			if err := cs.UnmarshalText([]byte(p.StateCache)); err != nil {
				bad(at+".state_cache", "%v", err)
			}
		}
		if p.Limits.Memory < 1<<20 {
			bad(at+".limits.memory", "%s is below the 1MiB minimum", p.Limits.Memory)
		} else if p.Limits.Memory > 4<<30 {
			bad(at+".limits.memory", "%s is over the 4GiB maximum of 32-bit Wasm", p.Limits.Memory)
		}
		if l := p.Limits; l.WindowBytes < l.EmitBytesPerRecord+l.StateBytesPerRecord {
			// A record must fit in a window, or it could fail at the
			// window's cap though its commit point came forward.
			bad(at+".limits.window_bytes", "%s is below what one record may stage: emit_bytes_per_record (%s) plus state_bytes_per_record (%s)",
				l.WindowBytes, l.EmitBytesPerRecord, l.StateBytesPerRecord)
		} else if c.Runtime.MemoryBudget < 2*l.WindowBytes {
			bad("runtime.memory_budget", "%s is below twice %s.limits.window_bytes (%s): one task could not reach its own cap", c.Runtime.MemoryBudget, at, l.WindowBytes)
		}
		if p.Limits.Stack > engine.MaxStackLimit {
			bad(at+".limits.stack", "%s is over the %s maximum", p.Limits.Stack, ByteSize(engine.MaxStackLimit))
		}
		for name, v := range map[string]int{"emits_per_record": p.Limits.EmitsPerRecord, "log_lines_per_second": p.Limits.LogLinesPerSecond,
			"timers": p.Limits.Timers, "timer_firings": p.Limits.TimerFirings, "commit_marks": p.Limits.CommitMarks} {
			if v < 0 {
				bad(at+".limits."+name, "must be positive")
			}
		}
		if p.Limits.RecordTimeout <= 0 {
			bad(at+".limits.record_timeout", "must be positive")
		} else if c.Guarantee == ExactlyOnce && 2*(p.Limits.RecordTimeout+c.Kafka.CommitInterval) > c.Kafka.TransactionTimeout {
			// A commit point comes at most one record late (time
			// isolation): the transaction must outlive that with room.
			bad(at+".limits.record_timeout", "%s plus kafka.commit_interval (%s) must be under half of kafka.transaction_timeout (%s): a slow record would hold the transaction near its timeout",
				p.Limits.RecordTimeout, c.Kafka.CommitInterval, c.Kafka.TransactionTimeout)
		}
	}
	if mem, win := c.instanceNeeds(); c.Runtime.MemoryBudget >= 2*win && c.Runtime.MemoryBudget < mem+2*win {
		// The instances' room is the budget less twice the largest window
		// (instanceRoom): one instance at its limits.memory must fit in it.
		bad("runtime.memory_budget", "%s is below the largest limits.memory (%s) plus twice the largest limits.window_bytes (%s): one task's instance could not grow to its limit beside a full window",
			c.Runtime.MemoryBudget, mem, win)
	}
	c.validateRepartition(bad)
	return errors.Join(errs...)
}

// instanceNeeds is the largest limits.memory and limits.window_bytes of
// the processors.
func (c *Config) instanceNeeds() (mem, win ByteSize) {
	for _, p := range c.Processors {
		mem, win = max(mem, p.Limits.Memory), max(win, p.Limits.WindowBytes)
	}
	return mem, win
}

// instanceRoom is what the instances' linear memory may take of
// runtime.memory_budget (account.Pool.SetInstanceRoom): all of it but
// twice the largest limits.window_bytes, so that however much memory the
// instances hold, a task's window can still reach its cap.
func (c *Config) instanceRoom() int64 {
	_, win := c.instanceNeeds()
	return int64(c.Runtime.MemoryBudget) - 2*int64(win)
}

// instanceMemoryWarning is what start-up says when the tasks the
// processors may run here (one per input partition, the most a process
// can be assigned: partitions maps each input topic to its count) could
// not all grow their instances to limits.memory within the instances'
// room: "" when they can. Not an error: a plugin rarely grows to its
// limit, and the account refuses what does not fit (RATIONALE.md,
// "Instances' linear memory is in the account too").
func (c *Config) instanceMemoryWarning(partitions map[string]int32) string {
	var worst int64
	tasks := 0
	for i := range c.Processors {
		pc := &c.Processors[i]
		n, ins := 0, c.runnerInputs(pc)
		for _, in := range ins {
			if len(ins) > 1 && len(c.taskStores(pc)) > 0 {
				n = max(n, int(partitions[in])) // co-partitioned: a task reads every input
			} else {
				n += int(partitions[in])
			}
		}
		tasks += n
		worst += int64(n) * int64(pc.Limits.Memory)
	}
	room := c.instanceRoom()
	if tasks == 0 || room <= 0 || worst <= room {
		return ""
	}
	return fmt.Sprintf("runtime.memory_budget: up to %d tasks here whose instances may grow to %s together (tasks x limits.memory), past the %s the budget leaves them (%s less twice the largest limits.window_bytes): "+
		"once the instances hold that, a memory.grow returns -1 (records of a plugin that then traps fail with memory_limit), and past half of it only a task within its share (%s) grows; raise runtime.memory_budget or lower limits.memory, or run more processes",
		tasks, ByteSize(worst), ByteSize(room), c.Runtime.MemoryBudget, ByteSize(room/2/int64(tasks)))
}

// ValidateKafka checks only what a tool that talks to the config's Kafka
// needs (the topic commands): kafka.brokers, kafka.tls, kafka.sasl and
// app_id's form. Processors may be missing or incomplete, and app_id may
// be unset.
func (c *Config) ValidateKafka() error {
	errs := c.kafkaErrors()
	if c.AppID != "" {
		errs = append(errs, c.appIDErrors()...)
	}
	return errors.Join(errs...)
}

// appIDErrors are the problems of app_id.
func (c *Config) appIDErrors() []error {
	switch {
	case c.AppID == "":
		return []error{&ConfigError{Path: "app_id", Problem: "required (names the consumer group and internal topics)"}}
	case !nameRE.MatchString(c.AppID) || len(c.AppID) > 100:
		return []error{&ConfigError{Path: "app_id", Problem: fmt.Sprintf("%q must be 1-100 characters of a-z A-Z 0-9 . _ -", c.AppID)}}
	}
	return nil
}

// kafkaErrors are the problems of how the config reaches Kafka: the
// brokers' addresses, TLS and SASL.
func (c *Config) kafkaErrors() []error {
	var errs []error
	for i, b := range c.Kafka.Brokers {
		if _, port, ok := strings.Cut(b, ":"); !ok || port == "" {
			errs = append(errs, &ConfigError{Path: fmt.Sprintf("kafka.brokers[%d]", i), Problem: fmt.Sprintf("%q is not host:port", b)})
		}
	}
	return append(errs, c.Kafka.validateSecurity()...)
}

// validateSecurity returns the problems of kafka.tls and kafka.sasl.
func (k *KafkaConfig) validateSecurity() []error {
	var errs []error
	for _, fe := range k.security().Validate() {
		errs = append(errs, &ConfigError{Path: "kafka." + fe.Path, Problem: fe.Problem})
	}
	if len(k.Brokers) == 0 && k.security().Enabled() {
		errs = append(errs, &ConfigError{Path: "kafka.brokers",
			Problem: "required with kafka.tls or kafka.sasl (the embedded development broker is plaintext)"})
	}
	return errs
}

// validateRepartition checks the repartition outputs and the inputs that
// refer to them; bad records a problem at a field path.
func (c *Config) validateRepartition(bad func(path, format string, args ...any)) {
	if c.Kafka.RepartitionPurgeInterval < 0 {
		bad("kafka.repartition_purge_interval", "must be positive")
	}
	readers := map[string][]string{} // repartition topic -> reading processors
	// feeds[a] are the processors that read a repartition output of a.
	feeds := map[string][]string{}
	for i := range c.Processors {
		p := &c.Processors[i]
		at := fmt.Sprintf("processors[%d]", i)
		for j, in := range p.Inputs {
			w, out, declared := c.repartitionRef(in)
			at := fmt.Sprintf("%s.inputs[%d]", at, j)
			switch {
			case w == nil:
			case !declared:
				bad(at, "%q names processor %q, which has no repartition output %q (its repartition outputs: %q); an input <processor>.<output> always refers to a repartition output",
					in, w.Name, out, w.Repartition)
			case w == p:
				bad(at, "%q is the processor's own repartition output; a processor cannot read what it writes", in)
			default:
				t := c.RepartitionTopic(w.Name, out)
				readers[t] = append(readers[t], p.Name)
				feeds[w.Name] = append(feeds[w.Name], p.Name)
			}
		}
	}
	for i := range c.Processors {
		p := &c.Processors[i]
		at := fmt.Sprintf("processors[%d]", i)
		if p.RepartitionPartitions < 0 {
			bad(at+".repartition_partitions", "must be positive")
		} else if p.RepartitionPartitions > 0 && len(p.Repartition) == 0 {
			bad(at+".repartition_partitions", "is set but the processor has no repartition outputs")
		}
		seen := map[string]bool{}
		for j, name := range p.Repartition {
			at := fmt.Sprintf("%s.repartition[%d]", at, j)
			topic := c.RepartitionTopic(p.Name, name)
			switch {
			case !nameRE.MatchString(name):
				bad(at, "output name %q must be made of a-z A-Z 0-9 . _ -", name)
			case seen[name]:
				bad(at, "output %q is listed twice", name)
			case p.Outputs[name].Topic != "":
				bad(at, "output %q is also in outputs (to topic %q); an output goes to a topic or to a repartition topic, not both", name, p.Outputs[name].Topic)
			case len(topic) > maxTopicName:
				bad(at, "its topic %q is longer than Kafka's %d characters; use a shorter app_id, processor or output name", topic, maxTopicName)
			case len(readers[topic]) == 0:
				bad(at, "no processor reads it: name %q in the inputs of the processor that aggregates it (its records would pile up, never purged)", p.Name+"."+name)
			}
			seen[name] = true
		}
	}
	if cycle := findCycle(c.Processors, feeds); cycle != nil {
		bad("processors", "processors %s feed each other through repartition topics in a cycle; a chain must end", strings.Join(cycle, " -> "))
	}
}

// findCycle returns a cycle of processors in feeds (writer -> readers), as
// names from the first to itself again, or nil.
func findCycle(procs []ProcessorConfig, feeds map[string][]string) []string {
	const (
		unseen = iota
		onPath
		done
	)
	mark := map[string]int{}
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		mark[n] = onPath
		path = append(path, n)
		for _, next := range feeds[n] {
			switch mark[next] {
			case onPath:
				start := slices.Index(path, next)
				return append(slices.Clone(path[start:]), next)
			case unseen:
				if c := visit(next); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		mark[n] = done
		return nil
	}
	for _, p := range procs {
		if mark[p.Name] == unseen {
			if c := visit(p.Name); c != nil {
				return c
			}
		}
	}
	return nil
}
