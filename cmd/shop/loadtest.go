package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/shop-oss/shop/internal/loadtest"
)

// Environment variables for the admin credentials, so they need not appear
// in a process list.
const (
	envLoadtestEmail    = "SHOP_LOADTEST_ADMIN_EMAIL"
	envLoadtestPassword = "SHOP_LOADTEST_ADMIN_PASSWORD"
)

func newLoadtestCmd(a *app) *cobra.Command {
	cfg := loadtest.Config{}
	var asJSON bool
	var procs int
	var cpuProfile string
	var roomRate int
	var room loadtest.RoomConfig
	cmd := &cobra.Command{
		Use:   "loadtest --admin-email E --admin-password P [flags]",
		Short: "Run a flash sale against a running server and check that it added up",
		Long: "Create a product with --units units and --users shoppers through the API, fire purchases at it " +
			"(--rate per second, or as fast as --connections go with --rate 0) for --duration or until nothing " +
			"more can be sold, then wait for the order writer and check the invariants: accepted == sold == " +
			"seeded - available, nobody over --per-user-limit, every accepted order confirmed once; with --redis-url and " +
			"--database-url also I1–I7 on the stores themselves (no oversell at any moment, every accepted order a row, " +
			"no duplicates, units conserved, nothing left pending, the server alive; I7: paid orders kept, releases once " +
			"and statuses agreeing). " +
			"With --pay-ratio R a share R of the winners then pay and the rest let their orders expire: the run " +
			"waits until the server has given their units back and checks that it did, once each. " +
			"With --waiting-room RATE the round gets a waiting room admitting RATE shoppers a second: every shopper " +
			"joins (solving --challenge-bits), follows its ticket's event stream until admitted (with --room-wait poll: reads " +
			"its ticket again about when its turn is due, by eta_seconds or position, between 100 ms and --ticket-poll-max apart) " +
			"and buys with its pass, up to --per-user-limit units; every shopper waits at once (a stream is a connection of " +
			"its own), and --connections caps the requests in flight; the run then " +
			"checks the early order against the published seed, the admissions against the rate, and that purchases " +
			"without a pass were refused. " +
			"Exits 1 when an invariant fails.\n\n" +
			"The admin comes from `shop user add --role admin`. Run the server with SHOP_RATE_LIMIT=0 (or a high " +
			"limit) for a load test: every shopper shares this machine's address; or, with SHOP_TRUSTED_PROXIES=127.0.0.1, give " +
			"--forwarded-for, and every request (sign-up, login, purchase, read) carries its shopper's own address. " +
			"Only loopback targets are allowed unless --allow-remote is given. Each run leaves its product, shoppers and " +
			"orders behind (a run that fails deletes its product): point it at a throwaway database.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.AdminEmail = flagOrEnv(cmd, "admin-email", cfg.AdminEmail, a.getenv, envLoadtestEmail)
			cfg.AdminPassword = flagOrEnv(cmd, "admin-password", cfg.AdminPassword, a.getenv, envLoadtestPassword)
			if procs < 0 {
				return errors.New("--procs must be 0 (all cores) or more")
			}
			if procs > 0 {
				runtime.GOMAXPROCS(procs)
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			if roomRate > 0 {
				room.AdmitPerSecond = roomRate
				cfg.Room = &room
			}
			cfg.Progress = terminal(a.stderr)
			cfg.Warn = a.stderr
			rep, err := loadtest.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if err := writeReport(a.stdout, rep, asJSON); err != nil {
				return err
			}
			if !rep.OK {
				return errors.New("loadtest: invariant failed: " + rep.Failure())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Target, "target", "http://127.0.0.1:8080", "base URL of the running shop")
	f.BoolVar(&cfg.AllowRemote, "allow-remote", false, "allow a target that does not resolve to a loopback address")
	f.StringVar(&cfg.AdminEmail, "admin-email", "", "admin's email (or $"+envLoadtestEmail+")")
	f.StringVar(&cfg.AdminPassword, "admin-password", "", "admin's password (or $"+envLoadtestPassword+")")
	f.IntVar(&cfg.Users, "users", 200, "shoppers to register and log in")
	f.IntVar(&cfg.Units, "units", 1000, "units of stock to seed")
	f.IntVar(&cfg.PerUserLimit, "per-user-limit", 1, "most units one shopper may buy (0: unlimited)")
	f.IntVar(&cfg.Rate, "rate", 0, "purchase attempts per second (0: as fast as --connections go)")
	f.IntVar(&cfg.Connections, "connections", 200, "concurrent requests and connections (the exact number with --rate 0, a cap otherwise)")
	f.DurationVar(&cfg.Duration, "duration", 30*time.Second, "longest attack (it ends earlier once nothing can be sold); at most 10m")
	f.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "per-request timeout")
	f.DurationVar(&cfg.DrainTimeout, "drain-timeout", time.Minute, "how long to wait for the order writer after the attack")
	f.IntVar(&cfg.Sample, "sample", 20, "accepted orders to read back and check confirmed")
	f.Float64Var(&cfg.PayRatio, "pay-ratio", 0, "share of the winners (0 to 1) that pay after the sale; the rest let their orders expire, "+
		"and the run waits for the server to give their units back (run it with a short SHOP_PAYMENT_TTL). 0: nobody pays, nothing is waited for")
	f.DurationVar(&cfg.ExpiryTimeout, "expiry-timeout", time.Minute,
		"with --pay-ratio, how long past the last unpaid order's expires_at to wait for the expiry sweep")
	f.IntVar(&cfg.SetupWorkers, "setup-workers", 4, "shoppers registered at once")
	f.BoolVar(&cfg.ForwardedFor, "forwarded-for", false,
		"send every request of a shopper (sign-up, login, purchases, reads) with its own X-Forwarded-For address (198.18.0.0/15), "+
			"and the admin's with one more, for a server with SHOP_TRUSTED_PROXIES=127.0.0.1 that limits per shopper")
	f.StringVar(&cfg.RedisURL, "redis-url", "", "the server's Redis: with --database-url, the invariants are also judged on the stores directly "+
		"(live stock sampled during the attack, rows, stream, pending entries)")
	f.BoolVar(&cfg.RedisCluster, "redis-cluster", false, "--redis-url names a Redis Cluster (a seed node, more seeds as ?addr=host:port), "+
		"as SHOP_REDIS_URL does with SHOP_REDIS_CLUSTER=true: the checks read each key on the master that holds it")
	f.StringVar(&cfg.DatabaseURL, "database-url", "", "the server's PostgreSQL (with --redis-url)")
	f.StringVar(&cfg.KeyPrefix, "key-prefix", "shop:", "the server's SHOP_KEY_PREFIX (with --redis-url)")
	f.StringVar(&cfg.AcceptedOut, "accepted-out", "", "write the id of every order answered 202 to this file, one a line (for shop recover --accepted)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.IntVar(&procs, "procs", 0, "cores the load generator may use at once (GOMAXPROCS; 0: all). "+
		"On a machine shared with the server, 1 leaves the rest to the server, like the single-threaded redis-benchmark")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile to this file (go tool pprof), "+
		"to tell its cost from the server's")
	f.IntVar(&roomRate, "waiting-room", 0, "put the round behind a waiting room admitting this many shoppers a second (0: none)")
	f.IntVar(&room.ChallengeBits, "challenge-bits", 0, "the waiting room's proof-of-work bits (solved here, by the load generator)")
	f.DurationVar(&room.JoinWindow, "join-window", 3*time.Second, "how long before the sale the waiting room opens (who joins in it is shuffled)")
	f.DurationVar(&room.MaxPoll, "ticket-poll-max", 2*time.Second, "with --waiting-room, the longest a polling shopper "+
		"(--room-wait poll, or one whose stream keeps failing) goes between two reads of its ticket "+
		"(it reads again about when its turn is due, by eta_seconds, at least 100 ms later)")
	f.StringVar(&room.Wait, "room-wait", loadtest.WaitEvents, "with --waiting-room, how a waiting shopper learns of its turn: "+
		"events (follow the ticket's event stream, one connection each, no reads) or poll (read the ticket again and again)")
	f.DurationVar(&room.PassTTL, "pass-ttl", 2*time.Minute, "how long an admitted shopper's pass lasts")
	cmd.AddCommand(newLoadtestGetCmd(a))
	return cmd
}

// newLoadtestGetCmd is `shop loadtest get`: the same load generator firing
// GETs of one path, nothing set up, no invariants (make bench compares a
// product read with /healthz this way).
func newLoadtestGetCmd(a *app) *cobra.Command {
	cfg := loadtest.GetConfig{}
	var asJSON bool
	var procs int
	cmd := &cobra.Command{
		Use:   "get --path PATH [flags]",
		Short: "Fire GETs of one path at a running server and report throughput and latency",
		Long: "Send GET --path (--rate per second, or as fast as --connections go with --rate 0) for --duration, " +
			"with the load generator of `shop loadtest`, and report throughput, latency percentiles and statuses. " +
			"Nothing is created and no invariant is checked; exits 1 when an answer is not --expect. " +
			"Only loopback targets are allowed unless --allow-remote is given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if procs < 0 {
				return errors.New("--procs must be 0 (all cores) or more")
			}
			if procs > 0 {
				runtime.GOMAXPROCS(procs)
			}
			rep, err := loadtest.Get(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if asJSON {
				err = rep.WriteJSON(a.stdout)
			} else {
				err = rep.WriteText(a.stdout)
			}
			if err != nil {
				return err
			}
			if !rep.OK {
				return fmt.Errorf("loadtest get: not every answer was %d: %v", cfg.Expect, rep.StatusCodes)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Target, "target", "http://127.0.0.1:8080", "base URL of the running shop")
	f.BoolVar(&cfg.AllowRemote, "allow-remote", false, "allow a target that does not resolve to a loopback address")
	f.StringVar(&cfg.Path, "path", "/healthz", "the path to GET, like /api/v1/products/SKU")
	f.IntVar(&cfg.Rate, "rate", 0, "requests per second (0: as fast as --connections go)")
	f.IntVar(&cfg.Connections, "connections", 200, "concurrent requests and connections (the exact number with --rate 0, a cap otherwise)")
	f.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to fire; at most 10m")
	f.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "per-request timeout")
	f.IntVar(&cfg.Addresses, "addresses", 0,
		"spread the requests over this many X-Forwarded-For addresses (198.18.0.0/15), for a server with SHOP_TRUSTED_PROXIES=127.0.0.1 that limits per client")
	f.IntVar(&cfg.Expect, "expect", 200, "the status every answer must have")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.IntVar(&procs, "procs", 0, "cores the load generator may use at once (GOMAXPROCS; 0: all)")
	return cmd
}

// startCPUProfile profiles this process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// flagOrEnv is the flag's value when given, else the environment's.
func flagOrEnv(cmd *cobra.Command, flag, value string, getenv func(string) string, env string) string {
	if cmd.Flags().Changed(flag) || getenv == nil {
		return value
	}
	return getenv(env)
}

// terminal returns w when it is a terminal, where a progress bar belongs;
// piped or captured output gets none.
func terminal(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return w
	}
	return nil
}

func writeReport(w io.Writer, rep *loadtest.Report, asJSON bool) error {
	if asJSON {
		return rep.WriteJSON(w)
	}
	return rep.WriteText(w)
}
