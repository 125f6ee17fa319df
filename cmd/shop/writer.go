package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/bestseller"
	"github.com/shop-oss/shop/internal/config"
	"github.com/shop-oss/shop/internal/lock"
	"github.com/shop-oss/shop/internal/order/writer"
	"github.com/shop-oss/shop/internal/shop"
)

// writerFlags are the order writer's tuning flags, shared by `shop writer`
// and `shop serve`.
type writerFlags struct {
	consumer      string
	batch         int
	claimIdle     time.Duration
	forgetIdle    time.Duration
	maxDeliveries int
	concurrency   int
	linger        time.Duration
}

func (f *writerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.consumer, "consumer", "", "this writer's consumer name, unique among running writers (default hostname-pid)")
	cmd.Flags().IntVar(&f.batch, "batch", 1000, "most orders written per transaction")
	cmd.Flags().DurationVar(&f.claimIdle, "claim-idle", 30*time.Second, "take over entries another writer left unacknowledged this long")
	cmd.Flags().DurationVar(&f.forgetIdle, "forget-idle", 10*time.Minute,
		"remove other writers' consumers from the group once idle this long with nothing pending (XGROUP DELCONSUMER)")
	cmd.Flags().IntVar(&f.maxDeliveries, "max-deliveries", 5, "deliveries before an entry that cannot be written is dead-lettered")
	// Three: while one batch waits for PostgreSQL the next is read and the
	// last acknowledged. Two took the drain rate from ~15k to ~22k orders/s
	// on two cores; three beat two in 6 of 8 alternating runs on the loaded
	// machine (median +28 %), four was no better (BENCHMARKS.md).
	cmd.Flags().IntVar(&f.concurrency, "concurrency", 3, "most batches written at once (consumers <consumer>-1..n in this process; all but the first read only while the stream is behind)")
	// 50 ms: with Redis at appendfsync always, each PostgreSQL commit's
	// flush queues Redis's own fsyncs on the same disk; at 3,000
	// purchases/s linger cut the writer's commits from ~250/s to ~20/s and
	// the purchases' p99 from 42-56 ms to 24-27 ms (BENCHMARKS.md).
	cmd.Flags().DurationVar(&f.linger, "linger", 50*time.Millisecond, "after a batch smaller than --batch, wait this long from its read before reading again "+
		"(fewer, larger transactions at moderate rates; adds at most this to the persistence lag; 0: read again at once)")
}

func (f *writerFlags) options() writer.Options {
	return writer.Options{Consumer: f.consumer, Batch: f.batch, ClaimIdle: f.claimIdle,
		ForgetIdle: f.forgetIdle, MaxDeliveries: f.maxDeliveries, Concurrency: f.concurrency, Linger: f.linger}
}

func newWriterCmd(a *app) *cobra.Command {
	var wf writerFlags
	var metricsAddr, faultSpec string
	cmd := &cobra.Command{
		Use:   "writer",
		Short: "Run only the order writer (several may run at once)",
		Long: "Persist the order stream to PostgreSQL: a consumer in the group \"writers\". " +
			"Several writers may run at once, on several machines; each needs a unique --consumer.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.config()
			if err != nil {
				return err
			}
			f, err := writerFault(faultSpec, cfg)
			if err != nil {
				return err
			}
			log := a.logger(cfg)
			ctx := cmd.Context()
			stopTracing, err := startTracing(ctx, log)
			if err != nil {
				return err
			}
			defer stopTracing()
			st, err := openMigrated(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer st.Close()
			reg := newRegistry()
			w := newWriter(st, cfg, log, reg, wf, nil)
			if f != nil {
				f.inject(w, log)
			}
			if metricsAddr != "" {
				stop, err := serveMetrics(metricsAddr, reg, log)
				if err != nil {
					return err
				}
				defer stop()
			}
			// The writer process sweeps too: with no serving instance up,
			// unpaid orders still expire.
			sweeper := shop.NewSweeper(st.shop(), cfg, shop.NewStock(st.shop(), cfg),
				lock.New(st.redis, cfg.KeyPrefix), log, reg)
			sctx, stopSweeper := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { _ = sweeper.Run(sctx); close(done) }()
			defer func() { stopSweeper(); <-done }()
			return w.Run(ctx)
		},
	}
	wf.register(cmd)
	readsSettings(cmd, migratedSettings)
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve /metrics and /healthz on this address (off when empty)")
	// Hidden: for the fault drills only, and refused outside SHOP_ENV=dev.
	cmd.Flags().StringVar(&faultSpec, "fault", "", "crash on purpose: exit|stop-before|after-commit:N (SHOP_ENV=dev only)")
	_ = cmd.Flags().MarkHidden("fault")
	return cmd
}

// writerFault parses --fault, which only a development process takes: a
// production writer must never crash on purpose.
func writerFault(spec string, cfg *config.Config) (*fault, error) {
	if spec == "" {
		return nil, nil
	}
	if !cfg.Dev() {
		return nil, fmt.Errorf("--fault is for fault drills: it needs SHOP_ENV=dev")
	}
	return parseFault(spec)
}

// newWriter builds the order writer, for `shop writer` and `shop serve`
// alike: the one place its after-commit work is wired (the best-seller
// boards, which serve's app already has; a writer-only process builds its
// own).
func newWriter(st *stores, cfg *config.Config, log *slog.Logger, reg prometheus.Registerer, wf writerFlags,
	boards *bestseller.Service) *writer.Writer {
	if boards == nil {
		boards = bestseller.New(st.redis, st.db, shop.NewCatalog(st.shop(), cfg, log, nil),
			lock.New(st.redis, cfg.KeyPrefix), cfg.KeyPrefix, log, reg)
	}
	o := wf.options()
	o.Partitions = cfg.Partitions()
	o.AfterCommit = shop.AfterCommit(boards)
	o.AfterTransition = shop.AfterTransition(boards)
	return writer.New(st.db, st.redis, cfg.KeyPrefix, log, reg, o)
}

func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveMetrics exposes a writer-only process's metrics and liveness; it
// returns a stop function.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	return serveSide("metrics", "--metrics-addr", addr, mux, log)
}
