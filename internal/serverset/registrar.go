package serverset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"golang.org/x/time/rate"
)

// Config configures a Registrar; New applies defaults.
type Config struct {
	Servers []string
	// Root is the znode under which serversets live (default /discovery).
	Root string
	// SessionTimeout of the ZooKeeper session (default 10s).
	SessionTimeout time.Duration
	// VerifyInterval between full checks that every member's znode exists
	// and belongs to the current session (default 5s); a pass on a change
	// checks only the members that changed.
	VerifyInterval time.Duration
	// Digest is "user:password": member znodes are then writable only with
	// these credentials and readable by all.
	Digest string
	// CreateRate and CreateBurst limit member creations per second: a
	// flapping pod or a mass re-registration after a session loss cannot
	// flood the ensemble (defaults 100/s, burst 110, a node's pods).
	// Deletions are never held back: a pod that cannot serve leaves at once.
	CreateRate  rate.Limit
	CreateBurst int
	// ReregisterJitter spreads re-registration after a session expiry over
	// a random delay up to this long, so that a fleet whose sessions expired
	// together (an ensemble outage) does not come back in one burst
	// (default 2s; negative disables).
	ReregisterJitter time.Duration
	// BufferSize bounds the client's send and receive buffers (default:
	// go-zookeeper's 1.5 MiB each). Processes holding thousands of
	// sessions, like the fleet benchmark, set it lower.
	BufferSize int
	Logger     *slog.Logger
}

// Registrar keeps ZooKeeper's serversets equal to the registrations set on it.
type Registrar struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	desired map[string]Registration
	// actual: key -> the znode path registered for it and the data written.
	actual map[string]registered
	kick   chan struct{}
	// changed is poked whenever a key is registered or deregistered, or
	// the session comes or goes (see Changes).
	changed chan struct{}

	connMu sync.Mutex
	conn   *zk.Conn
	// lastSession is when the client last had a session.
	lastSession time.Time
	// lostAt is since when the client has been without a session: when it
	// lost the one it had, or when the Registrar was made (zero while it
	// has one).
	lostAt time.Time
	// Writes counts create and delete requests (for benchmarks and tests).
	writes int64
	// adopted: serverset dirs already swept for our own stale members in a
	// session (dir -> session id).
	adopted map[string]int64

	limiter *rate.Limiter
	// holdUntil delays creations after a session expiry (jitter).
	holdUntil time.Time
	// throttled counts creations deferred by the limiter or the jitter.
	throttled int64
	// dirtySince is when desired and actual state last started to differ
	// (zero while they agree): the reconcile lag.
	dirtySince time.Time
	// gen counts changes of desired state (and session losses): a pass that
	// ends without errors clears dirtySince only if nothing changed during it.
	gen   uint64
	retry *time.Timer
}

type registered struct {
	path string
	data []byte
	reg  Registration
	// session is the session the znode was created or adopted in.
	session int64
}

// New returns a Registrar; Run connects it.
func New(cfg Config) *Registrar {
	if cfg.Root == "" {
		cfg.Root = "/discovery"
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	if cfg.VerifyInterval == 0 {
		cfg.VerifyInterval = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.CreateRate == 0 {
		cfg.CreateRate = 100
	}
	if cfg.CreateBurst == 0 {
		cfg.CreateBurst = 110
	}
	if cfg.ReregisterJitter == 0 {
		cfg.ReregisterJitter = 2 * time.Second
	}
	return &Registrar{
		cfg: cfg, log: cfg.Logger, desired: map[string]Registration{}, actual: map[string]registered{},
		kick: make(chan struct{}, 1), changed: make(chan struct{}, 1), adopted: map[string]int64{},
		limiter: rate.NewLimiter(cfg.CreateRate, cfg.CreateBurst), lostAt: time.Now(),
	}
}

// Set declares that key should be registered as reg.
func (r *Registrar) Set(key string, reg Registration) error {
	if err := reg.validate(); err != nil {
		return err
	}
	r.mu.Lock()
	r.desired[key] = reg
	r.markDirty()
	r.mu.Unlock()
	r.poke()
	return nil
}

// markDirty records that desired state changed; r.mu is held.
func (r *Registrar) markDirty() {
	r.gen++
	if r.dirtySince.IsZero() {
		r.dirtySince = time.Now()
	}
}

// Lag is how long desired and registered state have differed (0 when
// ZooKeeper holds exactly the desired registrations).
func (r *Registrar) Lag() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dirtySince.IsZero() {
		return 0
	}
	return time.Since(r.dirtySince)
}

// Throttled is the number of reconcile passes that deferred creations to
// the rate limit or the re-registration jitter.
func (r *Registrar) Throttled() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.throttled
}

// Remove declares that key should not be registered.
func (r *Registrar) Remove(key string) {
	r.mu.Lock()
	delete(r.desired, key)
	r.markDirty()
	r.mu.Unlock()
	r.poke()
}

// Writes is the number of create and delete requests sent so far.
func (r *Registrar) Writes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

// Registered returns the znode path of every key registered now.
func (r *Registrar) Registered() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for k, a := range r.actual {
		out[k] = a.path
	}
	return out
}

// Changes is poked (without blocking, coalesced) whenever a key is
// registered or deregistered, or the session comes or goes: a caller that
// reflects Registered elsewhere re-reads it then.
func (r *Registrar) Changes() <-chan struct{} { return r.changed }

func (r *Registrar) changedNow() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// SessionLost is how long the client has been without a session: since it
// lost the one it had, or since the Registrar was made if it never had one
// (0 while it has one).
func (r *Registrar) SessionLost() time.Duration {
	r.connMu.Lock()
	defer r.connMu.Unlock()
	if r.lostAt.IsZero() {
		return 0
	}
	return time.Since(r.lostAt)
}

// SessionTimeout is the configured ZooKeeper session timeout.
func (r *Registrar) SessionTimeout() time.Duration { return r.cfg.SessionTimeout }

func (r *Registrar) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run keeps ZooKeeper in line with the desired registrations until ctx ends,
// then deregisters everything (best effort) and closes the session.
func (r *Registrar) Run(ctx context.Context) error {
	if err := r.connect(); err != nil {
		return err
	}
	defer r.shutdown()
	t := time.NewTicker(r.cfg.VerifyInterval)
	defer t.Stop()
	// A full pass checks that every member's znode still exists and is
	// this session's (one ZooKeeper read each); a pass on a change checks
	// only what changed, so that one pod's flip costs one write, not a
	// read per pod of the node first.
	full := true
	for {
		err := r.reconcile(full)
		if err != nil {
			r.log.Warn("serverset reconcile failed; will retry", "err", err)
		}
		r.maybeRebuild()
		full = err != nil
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
		case <-t.C:
			full = true
		}
	}
}

func (r *Registrar) connect() error {
	// go-zookeeper's option type is unexported: choose between two calls.
	var conn *zk.Conn
	var events <-chan zk.Event
	var err error
	if n := r.cfg.BufferSize; n > 0 {
		conn, events, err = zk.Connect(r.cfg.Servers, r.cfg.SessionTimeout, zk.WithLogInfo(false), zk.WithLogger(discardLogger{}),
			zk.WithMaxBufferSize(n), zk.WithMaxConnBufferSize(n))
	} else {
		conn, events, err = zk.Connect(r.cfg.Servers, r.cfg.SessionTimeout, zk.WithLogInfo(false), zk.WithLogger(discardLogger{}))
	}
	if err != nil {
		return fmt.Errorf("failed to connect to zookeeper %v: %w", r.cfg.Servers, err)
	}
	if r.cfg.Digest != "" {
		if err := conn.AddAuth("digest", []byte(r.cfg.Digest)); err != nil {
			conn.Close()
			return fmt.Errorf("failed to authenticate to zookeeper: %w", err)
		}
	}
	r.connMu.Lock()
	r.conn = conn
	r.lastSession = time.Now()
	r.connMu.Unlock()
	go func() {
		for ev := range events {
			if ev.Type != zk.EventSession {
				continue
			}
			r.connMu.Lock()
			switch {
			case ev.State == zk.StateHasSession:
				r.lastSession = time.Now()
				r.lostAt = time.Time{}
			case r.lostAt.IsZero() && (ev.State == zk.StateDisconnected || ev.State == zk.StateExpired || ev.State == zk.StateConnecting):
				r.lostAt = time.Now()
			}
			r.connMu.Unlock()
			r.changedNow()
			if ev.State == zk.StateExpired {
				r.mu.Lock()
				r.markDirty() // every member is gone with the session
				if j := r.cfg.ReregisterJitter; j > 0 {
					r.holdUntil = time.Now().Add(rand.N(j))
				}
				r.mu.Unlock()
			}
			if ev.State == zk.StateHasSession || ev.State == zk.StateExpired {
				r.log.Info("zookeeper session event", "state", ev.State.String())
				r.poke()
			}
		}
	}()
	return nil
}

// maybeRebuild replaces a client that has had no session for twice the
// session timeout: a server restarted with an empty data dir refuses the
// client's zxid forever, and only a new client gets a session.
func (r *Registrar) maybeRebuild() {
	r.connMu.Lock()
	conn := r.conn
	stale := conn.State() != zk.StateHasSession && time.Since(r.lastSession) > 2*r.cfg.SessionTimeout
	r.connMu.Unlock()
	if !stale {
		return
	}
	r.log.Warn("no zookeeper session for too long; rebuilding the client")
	conn.Close()
	if err := r.connect(); err != nil {
		r.log.Warn("failed to rebuild zookeeper client", "err", err)
	}
}

func (r *Registrar) current() *zk.Conn {
	r.connMu.Lock()
	defer r.connMu.Unlock()
	return r.conn
}

func (r *Registrar) acl() []zk.ACL {
	if r.cfg.Digest == "" {
		return zk.WorldACL(zk.PermAll)
	}
	user, pass, _ := strings.Cut(r.cfg.Digest, ":")
	return append(zk.DigestACL(zk.PermAll, user, pass), zk.WorldACL(zk.PermRead)...)
}

// reconcile makes ZooKeeper hold exactly the desired registrations, each
// in a znode owned by the current session with the current data.
func (r *Registrar) reconcile(full bool) error {
	conn := r.current()
	if conn.State() != zk.StateHasSession {
		return fmt.Errorf("no zookeeper session (state %s)", conn.State())
	}
	session := conn.SessionID()
	r.mu.Lock()
	gen := r.gen
	desired := make(map[string]Registration, len(r.desired))
	for k, v := range r.desired {
		desired[k] = v
	}
	actual := make(map[string]registered, len(r.actual))
	for k, v := range r.actual {
		actual[k] = v
	}
	r.mu.Unlock()

	var errs []error
	var deferred time.Duration // > 0: some creations wait for the limiter
	for key, a := range actual {
		if _, ok := desired[key]; ok {
			continue
		}
		if err := conn.Delete(a.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			errs = append(errs, fmt.Errorf("failed to deregister %s: %w", a.path, err))
			continue
		}
		r.forget(key, true)
	}
	for key, reg := range desired {
		data, err := reg.data()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if a, ok := actual[key]; ok {
			if !full && a.session == session && bytes.Equal(a.data, data) {
				continue // made in this session, unchanged: the full pass checks it
			}
			ok, err := r.owned(conn, a.path, session)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if ok && bytes.Equal(a.data, data) {
				continue // registered, ours, current: nothing to do
			}
			// Stale (a dead session's znode, or old data): replace it.
			if err := conn.Delete(a.path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				errs = append(errs, fmt.Errorf("failed to remove stale %s: %w", a.path, err))
				continue
			}
			r.forget(key, ok)
		}
		if deferred > 0 {
			continue // the limiter said wait: try again in the next pass
		}
		if wait := r.admitCreate(); wait > 0 {
			deferred = wait
			continue
		}
		p, err := r.create(conn, reg, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.mu.Lock()
		r.actual[key] = registered{path: p, data: data, reg: reg, session: session}
		r.writes++
		r.mu.Unlock()
		r.changedNow()
	}
	r.mu.Lock()
	if deferred > 0 {
		r.retryAfter(deferred)
	} else if len(errs) == 0 && r.gen == gen {
		// Every desired key is registered, current and ours, and nothing
		// else is: ZooKeeper holds the snapshot this pass worked from.
		r.dirtySince = time.Time{}
	}
	r.mu.Unlock()
	return errors.Join(errs...)
}

// admitCreate returns 0 when a creation may go ahead now, or how long to
// wait (re-registration jitter or the rate limit).
func (r *Registrar) admitCreate() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := time.Until(r.holdUntil); d > 0 {
		r.throttled++
		return d
	}
	res := r.limiter.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		r.throttled++
		return d
	}
	return 0
}

// retryAfter pokes the loop after d; r.mu is held.
func (r *Registrar) retryAfter(d time.Duration) {
	if r.retry != nil {
		r.retry.Stop()
	}
	r.retry = time.AfterFunc(d, r.poke)
}

func (r *Registrar) forget(key string, deleted bool) {
	r.mu.Lock()
	delete(r.actual, key)
	if deleted {
		r.writes++
	}
	r.mu.Unlock()
	r.changedNow()
}

// owned reports whether the znode exists and belongs to session.
func (r *Registrar) owned(conn *zk.Conn, p string, session int64) (bool, error) {
	ok, stat, err := conn.Exists(p)
	if err != nil { // Exists can return true with an error: trust the error
		return false, fmt.Errorf("failed to check %s: %w", p, err)
	}
	return ok && stat.EphemeralOwner == session, nil
}

func (r *Registrar) create(conn *zk.Conn, reg Registration, data []byte) (string, error) {
	dir := reg.Dir(r.cfg.Root)
	r.sweep(conn, dir)
	p, err := conn.Create(path.Join(dir, "member_"), data, zk.FlagEphemeral|zk.FlagSequence, r.acl())
	if errors.Is(err, zk.ErrNoNode) {
		if err := r.ensureDir(conn, dir); err != nil {
			return "", err
		}
		p, err = conn.Create(path.Join(dir, "member_"), data, zk.FlagEphemeral|zk.FlagSequence, r.acl())
	}
	if err != nil {
		// The create may have succeeded even though its answer was lost
		// (a connection loss mid-request): adopt our own znode rather than
		// create a second member with the same data.
		if found := r.findOwn(conn, dir, data); found != "" {
			return found, nil
		}
		return "", fmt.Errorf("failed to register in %s: %w", dir, err)
	}
	return p, nil
}

// findOwn returns a member of dir holding data and owned by the current
// session, if there is one.
func (r *Registrar) findOwn(conn *zk.Conn, dir string, data []byte) string {
	session := conn.SessionID()
	children, _, err := conn.Children(dir)
	if err != nil {
		return ""
	}
	for _, c := range children {
		p := path.Join(dir, c)
		d, stat, err := conn.Get(p)
		if err == nil && stat.EphemeralOwner == session && bytes.Equal(d, data) {
			return p
		}
	}
	return ""
}

// sweep deletes, once per directory and session, members that carry data we
// register but belong to another (dead) session: what a restarted process
// left behind, which would otherwise linger until its session times out.
func (r *Registrar) sweep(conn *zk.Conn, dir string) {
	session := conn.SessionID()
	r.mu.Lock()
	done := r.adopted[dir] == session
	ours := map[string]bool{}
	for _, reg := range r.desired {
		if reg.Dir(r.cfg.Root) == dir {
			if d, err := reg.data(); err == nil {
				ours[string(d)] = true
			}
		}
	}
	r.mu.Unlock()
	if done {
		return
	}
	children, _, err := conn.Children(dir)
	if err != nil {
		return // no dir yet, or a transient error: nothing to sweep now
	}
	for _, c := range children {
		p := path.Join(dir, c)
		data, stat, err := conn.Get(p)
		if err != nil || stat.EphemeralOwner == session || !ours[string(data)] {
			continue
		}
		if err := conn.Delete(p, -1); err == nil {
			r.log.Info("removed a stale member left by another session", "path", p)
			r.mu.Lock()
			r.writes++
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	r.adopted[dir] = session
	r.mu.Unlock()
}

// ensureDir creates the persistent parents of a serverset.
func (r *Registrar) ensureDir(conn *zk.Conn, dir string) error {
	cur := ""
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		cur += "/" + part
		_, err := conn.Create(cur, nil, 0, r.acl())
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("failed to create %s: %w", cur, err)
		}
	}
	return nil
}

// shutdown deregisters everything (so clients stop sending at once, not
// after the session times out) and closes the session.
func (r *Registrar) shutdown() {
	r.mu.Lock()
	r.desired = map[string]Registration{}
	r.mu.Unlock()
	if err := r.reconcile(true); err != nil {
		r.log.Warn("deregistration on shutdown incomplete", "err", err)
	}
	r.current().Close()
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// HasSession reports whether the client currently has a ZooKeeper session.
func (r *Registrar) HasSession() bool {
	r.connMu.Lock()
	defer r.connMu.Unlock()
	return r.conn != nil && r.conn.State() == zk.StateHasSession
}

// Children lists the znodes under dir with the registrar's session (nil
// when dir does not exist). Without a session it fails rather than wait:
// a reader must never take "no answer" for "no members".
func (r *Registrar) Children(dir string) ([]string, error) {
	conn := r.current()
	if conn.State() != zk.StateHasSession {
		return nil, fmt.Errorf("failed to list %s: no zookeeper session (state %s)", dir, conn.State())
	}
	names, _, err := conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", dir, err)
	}
	return names, nil
}

// Member reads the member znode at p with the registrar's session;
// ok=false when it is gone or is not a member.
func (r *Registrar) Member(p string) (m Member, ok bool, err error) {
	conn := r.current()
	if conn.State() != zk.StateHasSession {
		return Member{}, false, fmt.Errorf("failed to read %s: no zookeeper session (state %s)", p, conn.State())
	}
	data, _, err := conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return Member{}, false, nil
	}
	if err != nil {
		return Member{}, false, fmt.Errorf("failed to read %s: %w", p, err)
	}
	m, err = ParseMember(data)
	return m, err == nil, nil
}

// Root is the znode under which the registrar's serversets live.
func (r *Registrar) Root() string { return r.cfg.Root }
