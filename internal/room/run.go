package room

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/shop-oss/shop/internal/telemetry"
)

// recordEvery spaces an instance's attempts to record one room.
const recordEvery = 5 * time.Second

// Run is an instance's admitter: every Tick, a turn in each live room,
// and the recording of each room that is over, until ctx ends. Every
// instance runs it; the rooms' scripts keep the admissions exact.
func (s *Service) Run(ctx context.Context) {
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	tried := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rooms, err := s.tracked(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("waiting rooms: read the index", "err", err)
			}
			continue
		}
		for _, t := range rooms {
			s.turn(ctx, t, tried)
		}
	}
}

// turn admits in t's room, or records it once it is over.
func (s *Service) turn(ctx context.Context, t trackedRoom, tried map[string]time.Time) {
	over, err := s.over(ctx, t)
	if err != nil {
		return // a store outage: the next tick tries again
	}
	if !over {
		s.admit(ctx, t)
		return
	}
	if time.Since(tried[t.member]) < recordEvery {
		return
	}
	tried[t.member] = time.Now()
	rctx, span := telemetry.Job(ctx, "room admitter: record room", attribute.String("shop.sku", t.sku), attribute.Int64("shop.round", t.round))
	err = s.Record(rctx, t.sku, t.round)
	telemetry.End(span, err)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("waiting room: record", "sku", t.sku, "round", t.round, "err", err)
		return
	}
	delete(tried, t.member)
}

// admit takes a turn in t's room. A turn is traced only when it admitted
// anyone, and then after the fact: ten turns a second in every room,
// most of them admitting nobody, would be a trace each.
func (s *Service) admit(ctx context.Context, t trackedRoom) {
	start := time.Now()
	turn, err := s.AdmitTurn(ctx, t.sku)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("waiting room: admit", "sku", t.sku, "round", t.round, "err", err)
	}
	if turn.Admitted > 0 {
		telemetry.Did(ctx, "room admitter: admit", start, attribute.String("shop.sku", t.sku),
			attribute.Int64("shop.round", t.round), attribute.Int64("shop.admitted", turn.Admitted))
	}
}
