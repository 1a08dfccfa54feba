package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/host/internal/copartition"
	"github.com/wasmstream/wasmstream/host/internal/kclient"
)

// groupOpts returns the client options of the chosen group protocol.
//
// franz-go uses KIP-848 only when asked (ServerSideBalancer) with a sticky
// or range balancer first; on a broker without KIP-848 it would then fall
// back to the classic protocol with that balancer, which is eager. So the
// runner asks the brokers itself and passes either the KIP-848 options or
// the classic cooperative ones, never both.
//
// copartitioned are the input lists of the co-partitioned processors
// (copartition.go). With any, the assignment must keep partition p of each
// list on one member: KIP-848 then uses the server's range assignor (it
// gives partition p of topics with the same partition count and the same
// subscribers to one member), the classic protocol the cooperative
// co-partitioning balancer, with cooperative-sticky as the fallback a
// group of mixed versions agrees on (the runner's own check keeps tasks
// whole then). Without any, the uniform (sticky) assignor balances better.
func groupOpts(ctx context.Context, kafka kclient.Config, want GroupProtocol, copartitioned [][]string, standbys bool, extra []kgo.Opt) ([]kgo.Opt, GroupProtocol, error) {
	if want == ProtocolAuto {
		ok, err := brokersSupport848(ctx, kafka, extra)
		if err != nil {
			return nil, 0, err
		}
		want = ProtocolClassic
		if ok {
			want = ProtocolConsumer
		}
	}
	switch {
	case want == ProtocolConsumer && len(copartitioned) > 0:
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}, want, nil
	case want == ProtocolConsumer:
		return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}, want, nil
	case want == ProtocolClassic && standbys:
		// Moved tasks go where their standbys are (standby.go).
		return []kgo.Opt{kgo.Balancers(copartition.StandbyBalancer(copartitioned), kgo.CooperativeStickyBalancer())}, want, nil
	case want == ProtocolClassic && len(copartitioned) > 0:
		return []kgo.Opt{kgo.Balancers(copartition.Balancer(copartitioned), kgo.CooperativeStickyBalancer())}, want, nil
	case want == ProtocolClassic:
		return []kgo.Opt{kgo.Balancers(kgo.CooperativeStickyBalancer())}, want, nil
	}
	return nil, 0, fmt.Errorf("group protocol %s: want auto, consumer or classic", want)
}

// brokersSupport848 reports whether every broker answers ConsumerGroupHeartbeat
// v1, the version franz-go's KIP-848 member needs.
func brokersSupport848(ctx context.Context, kafka kclient.Config, extra []kgo.Opt) (bool, error) {
	cl, err := kafka.NewClient(extra...)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resps := cl.RequestSharded(ctx, kmsg.NewPtrApiVersionsRequest())
	answered := 0
	for _, sh := range resps {
		if sh.Err != nil {
			continue
		}
		resp := sh.Resp.(*kmsg.ApiVersionsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			continue
		}
		answered++
		ok := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey == int16(kmsg.ConsumerGroupHeartbeat) && k.MaxVersion >= 1 {
				ok = true
			}
		}
		if !ok {
			return false, nil
		}
	}
	if answered == 0 {
		var errs []error
		for _, sh := range resps {
			errs = append(errs, sh.Err)
		}
		return false, fmt.Errorf("asking the brokers which group protocols they support: %w", errors.Join(errs...))
	}
	return true, nil
}
