package host

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/wasmstream/wasmstream/internal/testbroker"
	"github.com/wasmstream/wasmstream/internal/testutil"
)

// A process that died in the middle of a transaction leaves it open, with
// the group's offset of its task's input and a changelog record in it,
// until the broker's transaction timeout (here 5 minutes). The process
// that takes the task over fences the abandoned transaction (runner
// fence.go), so the task processes again within a couple of seconds of
// starting rather than at the timeout; the transaction's record and
// offset never count. Both brokers.
func TestAbandonedTransactionIsFenced(t *testing.T) {
	b := testbroker.New(t)
	in, out := b.Name(t, "in"), b.Name(t, "out")
	b.CreateTopic(t, in, 1, nil)
	b.CreateTopic(t, out, 1, nil)
	cfg := &Config{
		AppID: b.Name(t, "fence"),
		Kafka: KafkaConfig{Brokers: b.Addrs(), CommitInterval: 100 * time.Millisecond, SessionTimeout: 10 * time.Second,
			GroupProtocol: ProtocolClassic},
		Processors: []ProcessorConfig{{Name: "counter", Plugin: engineTestdata("statecounter"), Inputs: []string{in},
			Outputs: map[string]OutputConfig{"out": {Topic: out}}, Stores: []string{"counts"}, OnError: OnErrorFail}},
		State:   StateConfig{Dir: t.TempDir()},
		Runtime: RuntimeConfig{CacheDir: testCache()},
	}
	changelog := cfg.ChangelogTopic("counts")
	b.CreateTopic(t, changelog, 1, map[string]string{"cleanup.policy": "compact"})

	// The dead process: a transaction with a changelog record and the
	// group's offset of in/0, left open.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dead, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.TransactionalID(cfg.AppID+"-dead"),
		kgo.TransactionTimeout(5*time.Minute), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// Requests of Kafka 3.9: TxnOffsetCommit names topics, not ids.
		kgo.MaxVersions(kversion.V3_9_0()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	if err := dead.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	v := binary.LittleEndian.AppendUint64(nil, 1000)
	if err := dead.ProduceSync(ctx, &kgo.Record{Topic: changelog, Partition: 0, Key: []byte("k0"), Value: v}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := dead.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = cfg.AppID+"-dead", pid, epoch, cfg.AppID
	if resp, err := add.RequestWith(ctx, dead); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %v", err, kerr.ErrorForCode(resp.ErrorCode))
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = cfg.AppID+"-dead", cfg.AppID, pid, epoch
	commit.Generation = -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = in
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 3
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	resp, err := commit.RequestWith(ctx, dead)
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				t.Fatalf("TxnOffsetCommit: %v", err)
			}
		}
	}

	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k" + string(rune('0'+i))), Value: []byte("v")})
	}
	b.Produce(t, recs...)
	h, stop := (&pipeline{b: b, cfg: cfg}).run(t)
	_ = h
	// Every input record processed and committed, well before the dead
	// transaction's 5-minute timeout.
	testutil.Eventually(t, 2*time.Minute, func() error { return waitCommittedErr(t, b, cfg, in) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, r := range b.ReadCommitted(t, changelog, 30*time.Second) {
		counts[string(r.Key)] = binary.LittleEndian.Uint64(r.Value)
	}
	for i := range 10 {
		k := "k" + string(rune('0'+i))
		if counts[k] != 1 {
			t.Errorf("key %s counted %d, want 1 (the dead transaction's record must not count)", k, counts[k])
		}
	}
}
