/* The ensemble in the simulation (--ensemble; tests/sim/README.md, "The ensemble").
 *
 * Three servers under the single server's model of sim.c: the tree stays one (what the
 * quorum committed), and what this file adds is who may answer what, and when the leader
 * may expire a session, which is what the loss rule rests on:
 *
 * - A client's connection is on one server of those its connection string lists. A
 *   read (get, exists, children) is answered by that server alone, from the tree; a sync
 *   only once the server's leader has seen it; a write (create, delete, set, check) only
 *   once it reaches a leader that has a quorum (itself and a follower it still hears).
 *   A request that cannot be answered yet waits at the server, and the session's later
 *   requests wait behind it, as ZooKeeper keeps a session's requests in order.
 * - The leader pings its followers every half tick. A follower that has heard nothing
 *   from its leader for syncLimit ticks gives up (it stops serving and closes its
 *   clients' connections); until then it answers reads and its clients' pings even when
 *   cut off. A leader steps down on the first of its ticks at which no follower has
 *   answered for more than syncLimit ticks; until then it answers reads and syncs (but
 *   commits nothing without a follower). Servers without a leader elect one among a
 *   majority (150 to 500 ms); a server that finds a leader joins it. A follower that
 *   its leader reaches again before either gives up answers the pings sent meanwhile
 *   first, before any answer to its clients (the connection delivers them in order).
 * - Sessions: only the leader expires them, once it has a quorum to commit the close,
 *   on its tick boundaries (the expiry is rounded up to the next tick, as ZooKeeper's
 *   session tracker does). It hears of a session directly when the session is connected
 *   to it; of a session on a follower only from the follower's answers to its pings
 *   (every half tick), which carry the sessions the follower heard from since the last.
 *   A new leader gives every session a fresh timeout from its start.
 * - A server cut off from the leader sees no commits: the watch events of its clients'
 *   sessions wait until it sees them again or the client is on another server. Its
 *   reads are answered from the committed tree (a simplification: a real one answers
 *   from what it had when it was cut off).
 *
 * The invariant this adds (ens_check_expiry()): when the leader expires a session, the
 * loss deadline its client computed (zkl__lost_at(), on its clock) is no later than that
 * moment plus, for a session on a follower, the bound RELIABILITY.md documents: half a
 * tick plus the longer of a heartbeat (a sixth of the session timeout) and the longest
 * the follower went without hearing of the session since its last report. A holder
 * then must be told "lost" by its deadline.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklocks/zklocks.h>

#include "clock.h"
#include "internal.h"

#include "sim.h"

#define NSRV 3

enum role { R_LOOKING, R_FOLLOWING, R_LEADING };
static const char *const role_names[] = { "looking", "following", "leading" };

struct server {
	enum role role;
	int leader;          /* R_FOLLOWING: whose follower; R_LEADING: itself */
	int epoch;           /* of the leader it follows or is */
	bool down;
	int64_t down_until;
	int64_t cut_until;   /* cut off from the other servers until then */
	int64_t heard;       /* R_FOLLOWING: the last ping from its leader; R_LEADING: the last
	                      * answer of a follower */
	int64_t lead_start;  /* R_LEADING: its ticks are counted from here */
	bool reached;        /* R_FOLLOWING: its leader reached it at the last look */
};

static struct {
	struct server s[NSRV];
	int leader;          /* the leader of the newest epoch, -1 while there is none */
	int epoch;
	int tick, sync_limit;
	int64_t next_round;  /* the leaders' next pings (every half tick) */
	int64_t elect_at;    /* an election under way ends then (0: none) */
	int64_t disturbed;   /* the last moment a server was out of step with the leader */
	/* grant-idle: client freeze_cl stops as it sends its first check after freeze_after,
	 * until freeze_until */
	int freeze_cl;
	int64_t freeze_after, freeze_until;
	/* quiet-grant: client 0's server is cut off from the others as client 0 sends its
	 * first listing after cut_after (0: done) */
	int64_t cut_after;
} E;

static bool cut(int i)
{
	return E.s[i].cut_until > W.now;
}

static bool linked(int i, int j)
{
	return i == j ? !E.s[i].down : !E.s[i].down && !E.s[j].down && !cut(i) && !cut(j);
}

static bool serving(int i)
{
	return !E.s[i].down && E.s[i].role != R_LOOKING;
}

/* The leader server i hears now, or -1: itself when it leads. */
static int leader_of(int i)
{
	const struct server *v = &E.s[i];
	if (v->down || v->role == R_LOOKING)
		return -1;
	if (v->role == R_LEADING)
		return i;
	const struct server *l = &E.s[v->leader];
	if (l->role != R_LEADING || l->epoch != v->epoch || !linked(i, v->leader))
		return -1;
	return v->leader;
}

/* Whether leader l can commit: a follower of its epoch that it hears. */
static bool quorum(int l)
{
	if (l < 0 || E.s[l].down || E.s[l].role != R_LEADING)
		return false;
	for (int f = 0; f < NSRV; f++)
		if (f != l && E.s[f].role == R_FOLLOWING && E.s[f].leader == l &&
		    E.s[f].epoch == E.s[l].epoch && linked(l, f))
			return true;
	return false;
}

/* Whether server i sees the newest commits (its leader is the current one, with a
 * quorum). */
static bool in_sync(int i)
{
	int l = leader_of(i);
	return l >= 0 && l == E.leader && quorum(l);
}

static void become_looking(int i, const char *why)
{
	if (E.s[i].role == R_LOOKING)
		return;
	trace("server %d: %s (%s): looking for a leader", i, role_names[E.s[i].role], why);
	if (E.leader == i)
		E.leader = -1;
	E.s[i].role = R_LOOKING;
}

static void follow(int i, int l)
{
	trace("server %d: follows server %d (epoch %d)", i, l, E.s[l].epoch);
	E.s[i].role = R_FOLLOWING;
	E.s[i].leader = l;
	E.s[i].epoch = E.s[l].epoch;
	E.s[i].heard = W.now;
}

/* ------------------------------------------------------------------------------------ */
/* Scenarios: the cases found on real servers, scripted (--scenario NAME). The seed
 * draws the rest: delays, the order of what is due at once, the election's length. */

enum { SC_NONE, SC_FOLLOWER_CUT, SC_LEADER_CUT, SC_GRANT_IDLE, SC_QUIET_GRANT, SC_N };
static const char *const sc_names[SC_N] = { "", "follower-cut", "leader-cut", "grant-idle",
                                            "quiet-grant" };

int ens_scenario_named(const char *name)
{
	for (int i = 1; i < SC_N; i++)
		if (strcmp(name, sc_names[i]) == 0)
			return i;
	return -1;
}

const char *ens_scenario_name(int scenario)
{
	return scenario > 0 && scenario < SC_N ? sc_names[scenario] : "";
}

static void sc_contender(int j, int cl, int64_t start, int64_t hold_for)
{
	struct contender *t = &W.ct[j];
	*t = (struct contender){ .cl = cl, .path = 0, .kind = K_MUTEX, .shadow_of = -1,
	                         .cycles = 1, .cycles0 = 1, .st = CT_IDLE, .next_at = start,
	                         .scripted = true, .hold_for = hold_for };
	if (!(W.o.cont_mask & (1u << j))) {
		t->st = CT_DONE;
		t->cycles = 0;
	}
}

static void sc_fault(int i, enum fkind kind, int cl, int64_t at, int64_t dur, uint64_t pick)
{
	W.f[i] = (struct fault){ .kind = kind, .cl = cl, .at = at, .dur = dur, .pick = pick };
}

/* Fills W for the scenario, as scenario() in sim.c does from the seed. Server 0 leads at
 * the start. The cases (RELIABILITY.md, "The ensemble"):
 *
 * follower-cut: client 0 knows server 1 only, a follower, and holds p0 from the start;
 *   client 1 (servers 0 and 2) waits for it. At 5 s server 1 is cut off from the other
 *   two for 12 s: it answers reads for syncLimit (10 s) while the leader hears nothing
 *   of client 0's session and expires it 4 s on. Tick 1 s, sessions of 4 s, as the
 *   partition tests' ensemble.
 * leader-cut: client 0 on server 0, the leader, holds; it is cut off at 6.3 s for 20 s:
 *   it leads, and answers syncs, until it finds no follower for more than syncLimit
 *   ticks (18 s), while the other two give up on it at 16 s and elect a new leader
 *   (16.15 to 16.5 s) that gives the session a fresh timeout and expires it first (22
 *   s). Debian's tick (2 s) and syncLimit (5), sessions of 5.5 s: the new leader's
 *   expiry, rounded up to its tick, comes soon after its start plus the timeout (with a
 *   timeout of whole ticks the old leader would have less time to answer in).
 * grant-idle: client 0 knows server 0, the leader, and waits behind client 1's hold,
 *   which ends about 3.5 s in; client 0 stops (a pause) as it sends its first heartbeat
 *   after 3 s, with the news of its turn reaching its machine meanwhile, until 11.6 s;
 *   server 0 is cut off at 4.1 s. Client 0 takes its turn as it runs again, its
 *   heartbeat overdue in the same turn, after the new leader's election (10.15 to 10.5
 *   s) and before server 0 gives up leading (12 s), and before its own loss deadline.
 *   Tick 2 s, syncLimit 3, sessions of 9.5 s.
 * quiet-grant: client 0 knows server 1 only, a follower, and waits third in line (far
 *   from its grant, so its session sends nothing but pings: liveness.c) behind client
 *   1's hold (until 5 s) and client 2's short one; client 3 waits behind it. As client 0
 *   lists the queue on its turn, server 1 is cut off from the others for 12 s: it still
 *   answers reads, and the listing shows client 0 first, while the leader, hearing
 *   nothing more of the session, expires it about a session timeout after the follower's
 *   last report, and client 3 takes its turn. A grant reported on the strength of that
 *   listing (or of any answer but a committed write) would hold until a loss deadline
 *   counted from it, past that expiry: two holders. Tick 1 s, syncLimit 10, sessions of
 *   4 s, as follower-cut. */
void ens_scenario(void)
{
	memset(&E, 0, sizeof E); /* a run starts from nothing (workers run many) */
	W.delay_max = between(1, 40);
	W.npaths = 1;
	struct path_info *pi = &W.paths[0];
	snprintf(pi->path, sizeof pi->path, "/locks/p0");
	pi->kind = K_MUTEX;
	pi->max = 1;
	W.ncl = 2;
	W.nct = 2;
	int timeout = 4000;
	E.tick = 1000;
	E.sync_limit = 10;
	switch (W.o.scenario) {
	case SC_FOLLOWER_CUT:
		W.fault_end = 20000;
		sc_contender(0, 0, 0, 40000);
		sc_contender(1, 1, 1000, 100);
		W.nf = 1;
		sc_fault(0, F_SRV_CUT, 0, 5000, 12000, 1);
		W.cl[0].srv_mask = 1u << 1;
		W.cl[1].srv_mask = 1u << 0 | 1u << 2;
		break;
	case SC_LEADER_CUT:
		timeout = 5500;
		E.tick = 2000;
		E.sync_limit = 5;
		W.fault_end = 30000;
		sc_contender(0, 0, 0, 40000);
		sc_contender(1, 1, 1000, 100);
		W.nf = 1;
		sc_fault(0, F_SRV_CUT, 0, 6300, 20000, 0);
		W.cl[0].srv_mask = 1u << 0;
		W.cl[1].srv_mask = 1u << 1 | 1u << 2;
		break;
	case SC_QUIET_GRANT:
		W.ncl = 4;
		W.nct = 4;
		W.fault_end = 20000;
		sc_contender(0, 1, 0, 5000);
		sc_contender(1, 2, 300, 100);
		timeout = 9000;
		E.tick = 500;
		E.sync_limit = 20;
		sc_contender(2, 0, 600, 12000);
		sc_contender(3, 3, 900, 100);
		W.nf = 0;
		E.cut_after = 4000;
		W.cl[0].srv_mask = 1u << 1;
		W.cl[1].srv_mask = W.cl[2].srv_mask = W.cl[3].srv_mask = 1u << 0 | 1u << 2;
		break;
	case SC_GRANT_IDLE:
		timeout = 9500;
		E.tick = 2000;
		E.sync_limit = 3;
		W.fault_end = 30000;
		sc_contender(0, 1, 0, 3300);
		sc_contender(1, 0, 500, 40000);
		W.nf = 1;
		sc_fault(0, F_SRV_CUT, 0, 4100, 20000, 0);
		E.freeze_cl = 0;
		E.freeze_after = 3000;
		E.freeze_until = 11600;
		W.cl[0].srv_mask = 1u << 0;
		W.cl[1].srv_mask = 1u << 1 | 1u << 2;
		break;
	}
	for (int k = 0; k < W.ncl; k++) {
		W.cl[k].timeout = timeout;
		W.cl[k].cs_up = W.cl[k].sc_up = true;
	}
	W.next_reap = between(200, 3000);
	E.leader = 0;
	E.epoch = 1;
	for (int i = 0; i < NSRV; i++)
		E.s[i] = (struct server){ .role = i == 0 ? R_LEADING : R_FOLLOWING, .leader = 0,
		                          .epoch = 1 };
	E.next_round = E.tick / 2;
	E.elect_at = 0;
}

/* A request of s goes out (the scenario's pause may begin). */
void ens_sent(struct sess *s, int op)
{
	struct client *cl = &W.cl[s->cl];
	if (W.o.scenario == SC_QUIET_GRANT && E.cut_after && s->cl == 0 && op == OP_CHILDREN &&
	    W.now >= E.cut_after) {
		E.cut_after = 0;
		struct server *v = &E.s[s->srv];
		trace("FAULT: server %d (%s) cut off from the others for 15000 ms, as client 0 "
		      "lists", s->srv, role_names[v->role]);
		v->cut_until = W.now + 15000;
		return;
	}
	if (W.o.scenario != SC_GRANT_IDLE || !E.freeze_after || s->cl != E.freeze_cl ||
	    op != OP_CHECK || W.now < E.freeze_after || cl->life != L_RUN || cl->blocked)
		return;
	E.freeze_after = 0;
	trace("client %d: stops (a pause) until %" PRId64 " ms", s->cl, E.freeze_until);
	cl->life = L_FROZEN;
	cl->susp_from = W.now;
	cl->life_until = E.freeze_until;
	if (E.freeze_until > cl->faulted_until)
		cl->faulted_until = E.freeze_until;
}

/* ------------------------------------------------------------------------------------ */

/* Contender j (t) is told it holds. In quiet-grant, client 0's server commits nothing
 * from the moment client 0 lists on its turn, and client 0's last write (its create) is
 * seconds older than the freshness a grant asks for (a third of the session timeout): a
 * grant told there rests on no committed write. */
void ens_granted(const struct contender *t, int j)
{
	if (W.o.scenario != SC_QUIET_GRANT || t->cl != 0 || !W.cl[0].sess)
		return;
	const struct server *v = &E.s[W.cl[0].sess->srv];
	if (v->cut_until > W.now)
		violation("contender %d (client 0) is told it holds while its server, cut off from "
		          "the leader, has committed nothing since its turn came: a grant without "
		          "a fresh committed write", j);
}

void ens_init(void)
{
	memset(&E, 0, sizeof E);
	/* ZooKeeper takes session timeouts of 2 to 20 ticks; syncLimit is commonly 2 to 10
	 * ticks (Debian: tick 2 s, syncLimit 5; the fault tests: tick 1 s, syncLimit 10). */
	int t = W.cl[0].timeout;
	E.tick = (int)(t / between(2, 8));
	E.sync_limit = (int)between(2, 10);
	E.leader = (int)rnd(NSRV);
	E.epoch = 1;
	for (int i = 0; i < NSRV; i++)
		E.s[i] = (struct server){ .role = i == E.leader ? R_LEADING : R_FOLLOWING,
		                          .leader = E.leader, .epoch = 1 };
	E.next_round = E.tick / 2;
	E.elect_at = 0;
}

void ens_print(FILE *f)
{
	fprintf(f, "  ensemble: 3 servers, server %d leads, tick %d ms, syncLimit %d ticks%s%s\n",
	        E.leader, E.tick, E.sync_limit, W.o.scenario ? ", scenario " : "",
	        ens_scenario_name(W.o.scenario));
	for (int k = 0; k < W.ncl; k++)
		if (W.cl[k].srv_mask != 7u)
			fprintf(f, "  client %d knows server%s%s%s%s\n", k,
			        __builtin_popcount(W.cl[k].srv_mask) > 1 ? "s" : "",
			        W.cl[k].srv_mask & 1 ? " 0" : "", W.cl[k].srv_mask & 2 ? " 1" : "",
			        W.cl[k].srv_mask & 4 ? " 2" : "");
}

void ens_fault(struct fault *f)
{
	int i = (f->pick >> 8) & 1 && E.leader >= 0 ? E.leader : (int)(f->pick % NSRV);
	struct server *v = &E.s[i];
	if (f->kind == F_SRV_CUT) {
		trace("FAULT: server %d (%s) cut off from the others for %" PRId64 " ms", i,
		      role_names[v->role], f->dur);
		if (W.now + f->dur > v->cut_until)
			v->cut_until = W.now + f->dur;
	} else {
		trace("FAULT: server %d (%s) down for %" PRId64 " ms", i, role_names[v->role],
		      f->dur);
		become_looking(i, "down");
		v->down = true;
		if (W.now + f->dur > v->down_until)
			v->down_until = W.now + f->dur;
	}
}

/* Leader l pings follower f, which answers with the sessions it heard from since its
 * last answer. */
static void exchange(int l, int f, int64_t at)
{
	E.s[f].heard = W.now;
	E.s[l].heard = W.now;
	for (struct sess *s = W.sessions; s; s = s->next) {
		if (s->srv != f || !s->f_touched)
			continue;
		s->f_touched = false;
		s->f_gap = 0;
		if (l == E.leader && s->alive) {
			s->last_heard = at;
			s->via_follower = true;
		}
	}
}

/* The servers' own clockwork at W.now: restarts, pings, giving up, elections; then the
 * connections of servers that stopped serving close. */
void ens_tick(void)
{
	for (int i = 0; i < NSRV; i++) {
		struct server *v = &E.s[i];
		if (v->down && W.now >= v->down_until) {
			v->down = false;
			v->role = R_LOOKING;
			trace("server %d: up again", i);
		}
	}
	/* A leader's pings, every half tick: what its followers heard from their clients
	 * comes back in their answers. A follower that its leader reaches again before
	 * either gives up gets the pings sent meanwhile at once (the connection delivers
	 * them) and answers them before it answers anything else: its report comes first. */
	for (int f = 0; f < NSRV; f++) {
		struct server *v = &E.s[f];
		bool now = v->role == R_FOLLOWING && leader_of(f) == v->leader;
		if (now && !v->reached)
			exchange(v->leader, f, W.now);
		v->reached = now;
	}
	while (W.now >= E.next_round) {
		for (int l = 0; l < NSRV; l++) {
			if (E.s[l].down || E.s[l].role != R_LEADING)
				continue;
			for (int f = 0; f < NSRV; f++) {
				struct server *v = &E.s[f];
				if (f == l || v->role != R_FOLLOWING || v->leader != l ||
				    v->epoch != E.s[l].epoch || !linked(l, f))
					continue;
				exchange(l, f, E.next_round);
			}
		}
		E.next_round += E.tick / 2;
	}
	for (int i = 0; i < NSRV; i++) {
		struct server *v = &E.s[i];
		if (v->down)
			continue;
		if (v->role == R_FOLLOWING) {
			const struct server *l = &E.s[v->leader];
			/* A leader gone or no longer leading closes the connection: at once. */
			if (l->down || l->role != R_LEADING || l->epoch != v->epoch)
				become_looking(i, "its leader is gone");
			else if (W.now - v->heard >= (int64_t)E.sync_limit * E.tick)
				become_looking(i, "nothing from its leader for syncLimit ticks");
		} else if (v->role == R_LEADING && (W.now - v->lead_start) % E.tick == 0 &&
		           W.now - v->heard > (int64_t)E.sync_limit * E.tick) {
			become_looking(i, "no follower for syncLimit ticks");
		}
	}
	/* A server without a leader joins the current one if it hears it, else elects one
	 * with another server it hears. */
	int looking[NSRV], n = 0;
	for (int i = 0; i < NSRV; i++) {
		if (E.s[i].down || E.s[i].role != R_LOOKING)
			continue;
		if (E.leader >= 0 && linked(i, E.leader) && E.s[E.leader].role == R_LEADING) {
			follow(i, E.leader);
			continue;
		}
		looking[n++] = i;
	}
	int reach = 0;
	for (int a = 0; a < n; a++)
		for (int b = a + 1; b < n; b++)
			reach += linked(looking[a], looking[b]);
	if (reach == 0) {
		E.elect_at = 0;
	} else if (!E.elect_at) {
		E.elect_at = W.now + between(150, 500);
	} else if (W.now >= E.elect_at) {
		E.elect_at = 0;
		int l = -1;
		for (int a = 0; a < n && l < 0; a++)
			for (int b = 0; b < n; b++)
				if (a != b && linked(looking[a], looking[b]))
					l = looking[a];
		/* An old leader cut off from the others leads its own epoch until it steps
		 * down by itself (above). */
		E.epoch++;
		struct server *v = &E.s[l];
		v->role = R_LEADING;
		v->leader = l;
		v->epoch = E.epoch;
		v->heard = W.now;
		v->lead_start = W.now;
		E.leader = l;
		trace("server %d: leads (epoch %d)", l, E.epoch);
		W.elections++;
		for (int a = 0; a < n; a++)
			if (looking[a] != l && linked(looking[a], l))
				follow(looking[a], l);
		/* The new leader's session tracker: every session gets a fresh timeout. */
		for (struct sess *s = W.sessions; s; s = s->next) {
			if (!s->alive)
				continue;
			s->last_heard = W.now;
			s->f_touched = false;
			s->f_last = W.now;
			s->f_gap = 0;
			s->via_follower = s->srv != l && E.s[s->srv].role == R_FOLLOWING &&
			                  E.s[s->srv].leader == l;
		}
	}
	/* The old leader, if still leading its own epoch, steps down in its own time (above);
	 * a connection on a server that no longer serves closes. */
	for (struct sess *s = W.sessions; s; s = s->next)
		if (!s->closed && s->conn == C_UP && !serving(s->srv))
			disconnect(s, "its server stopped serving");
	for (int i = 0; i < NSRV; i++)
		if (!in_sync(i))
			E.disturbed = W.now;
	/* Watch events held while a server was cut off come once it sees commits again. */
	for (struct sess *s = W.sessions; s; s = s->next)
		if (!s->closed && s->conn == C_UP && s->held && in_sync(s->srv))
			release_held(s, W.now + delay());
}

int64_t ens_next(void)
{
	int64_t next = E.next_round;
	if (E.elect_at && E.elect_at < next)
		next = E.elect_at;
	for (int i = 0; i < NSRV; i++) {
		const struct server *v = &E.s[i];
		if (v->down && v->down_until < next)
			next = v->down_until;
		if (v->cut_until > W.now && v->cut_until < next)
			next = v->cut_until;
		if (!v->down && v->role == R_FOLLOWING) {
			int64_t at = v->heard + (int64_t)E.sync_limit * E.tick;
			if (at > W.now && at < next)
				next = at;
		}
		if (!v->down && v->role == R_LEADING) {
			int64_t at = W.now + E.tick - (W.now - v->lead_start) % E.tick;
			if (at < next)
				next = at;
		}
	}
	return next;
}

int64_t ens_disturbed(void)
{
	return E.disturbed;
}

bool ens_commits(void)
{
	return E.leader >= 0 && quorum(E.leader);
}

/* When the servers are whole again at the latest, once every fault has begun: the last
 * cut or outage ends, a follower gives up on a leader it lost, the others elect one,
 * and the new leader's first tick passes (its expiries are rounded up to it). */
int64_t ens_settled(void)
{
	int64_t end = W.now;
	for (int i = 0; i < NSRV; i++) {
		if (E.s[i].cut_until > end)
			end = E.s[i].cut_until;
		if (E.s[i].down && E.s[i].down_until > end)
			end = E.s[i].down_until;
	}
	return end + (int64_t)(E.sync_limit + 2) * E.tick + 500;
}

/* Whether the request at the head of s's queue, arrived at its server, can be answered
 * now; otherwise it waits there, and the session's later requests behind it. */
bool ens_ready(const struct sess *s, const struct msg *m)
{
	int i = s->srv;
	if (!serving(i))
		return false;
	switch (m->op) {
	case OP_GET:
	case OP_EXISTS:
	case OP_CHILDREN:
		return true;
	case OP_SYNC:
		return leader_of(i) >= 0;
	case OP_CREATE:
	case OP_DELETE:
	case OP_SET:
	case OP_CHECK:
	case OP_MULTI: /* one write, committed by a quorum as a whole */
		return quorum(leader_of(i));
	}
	return false;
}

/* A write's answer comes after the leader's proposal and a follower's acknowledgement. */
int64_t ens_extra_delay(const struct msg *m)
{
	switch (m->op) {
	case OP_CREATE:
	case OP_DELETE:
	case OP_SET:
	case OP_CHECK:
	case OP_MULTI:
		return delay();
	default:
		return 0;
	}
}

/* Whether s's server knows the session ended: it sees the leader's commits. */
bool ens_knows_expired(const struct sess *s)
{
	return in_sync(s->srv);
}

bool ens_holds_events(const struct sess *s)
{
	return !in_sync(s->srv);
}

bool ens_answers_ping(const struct sess *s)
{
	return serving(s->srv) && (s->alive || !ens_knows_expired(s));
}

/* The server s's connection is on heard from it (a request or a ping). */
void ens_touch(struct sess *s)
{
	int i = s->srv;
	if (!serving(i) || !s->alive)
		return;
	if (i == E.leader) {
		s->last_heard = W.now;
		s->via_follower = false;
	} else if (E.s[i].role == R_FOLLOWING) {
		if (W.now - s->f_last > s->f_gap)
			s->f_gap = W.now - s->f_last;
		s->f_last = W.now;
		s->f_touched = true;
	}
	/* An old leader's own record of the session counts for nothing. */
}

/* A server s's client can connect to now, or -1: one it lists, that it reaches, and
 * that can take the session (a new one is a write; one that exists is revalidated by
 * the leader). The C client goes through its list in a random order. */
int ens_pick(struct sess *s)
{
	int cand[NSRV], n = 0;
	for (int i = 0; i < NSRV; i++)
		if (W.cl[s->cl].srv_mask & (1u << i) && in_sync(i))
			cand[n++] = i;
	if (n == 0)
		return -1;
	return cand[rnd((uint64_t)n)];
}

void ens_connected(struct sess *s, int srv)
{
	s->srv = srv;
	s->f_touched = false;
	s->f_last = W.now;
	s->f_gap = 0;
	s->via_follower = srv != E.leader;
	trace("client %d: session %" PRIx64 " on server %d (%s)", s->cl, (uint64_t)s->id, srv,
	      role_names[E.s[srv].role]);
}

int64_t ens_expiry_at(const struct sess *s)
{
	int64_t at = s->last_heard + s->timeout;
	return (at + E.tick - 1) / E.tick * E.tick;
}

bool ens_expires(const struct sess *s)
{
	return E.leader >= 0 && quorum(E.leader) && W.now >= ens_expiry_at(s);
}

/* The leader expires s now. The loss deadline of its client, if it is still on s, must
 * not be later than now plus the documented bound for a session on a follower (none for
 * one on the leader); a holder whose deadline is still ahead must be told by then
 * (ens_check()); one whose deadline passed must have been told (check_expiry_told()). */
void ens_check_expiry(struct sess *s)
{
	if (W.tearing_down)
		return;
	/* The leader's record of a session on a follower is the follower's last report:
	 * what it heard of the session since may be lost with it. A client heard every
	 * heartbeat (a sixth of the timeout) is then at most half a tick and a heartbeat
	 * ahead of it; one whose requests were held up on the way, by as long as its
	 * follower went without hearing of it. */
	int64_t gap = s->f_gap > s->timeout / 6 ? s->f_gap : s->timeout / 6;
	int64_t allow = s->via_follower ? E.tick / 2 + gap : 0;
	bool later = false;
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		if (!t->believes || t->voided || t->sess != s->id)
			continue;
		struct client *cl = &W.cl[t->cl];
		if (cl->life == L_CRASHED || clock_stood_still(s) || !cl->c)
			continue; /* check_expiry_told() exempts it */
		zkl_client *c = cl->c;
		if (!c->sess || c->sess->zh != (zhandle_t *)s || c->sess->last_proof_sent == 0)
			continue;
		int64_t d = zkl__lost_at(c) + cl->lag; /* on the server's clock */
		W.ens_checked++;
		if (d > W.now + allow)
			violation("contender %d (client %d, %s %s) holds on session %" PRIx64 ", which "
			          "the leader expires now, while its client's loss deadline is %" PRId64
			          " ms (%" PRId64 " ms later; the documented bound for a session %s is %"
			          PRId64 " ms)", j, t->cl, kind_name(t->kind), W.paths[t->path].path,
			          (uint64_t)s->id, d, d - W.now,
			          s->via_follower ? "on a follower" : "on the leader", allow);
		if (d >= W.now) {
			W.ens_early++;
			t->tell_by = d;
			later = true;
		}
	}
	if (!later) {
		check_expiry_told(s);
		return;
	}
	/* Some are told later: check the others now, and those at their deadline. */
	for (int j = 0; j < W.nct; j++)
		if (W.ct[j].tell_by && W.ct[j].sess == s->id)
			W.ct[j].voided = true; /* out of check_expiry_told()'s way for now */
	check_expiry_told(s);
	for (int j = 0; j < W.nct; j++)
		if (W.ct[j].tell_by && W.ct[j].sess == s->id)
			W.ct[j].voided = false;
}

/* Client k runs again after a freeze: a hold whose loss deadline passed while it was
 * frozen is owed "lost" first thing, as one whose session expired then (resume()).
 * Without this, a deadline passed in the same millisecond the freeze ends, or with no
 * step between, would be checked only after the client's first turn. */
void ens_resume(int k)
{
	struct client *cl = &W.cl[k];
	if (cl->life != L_FROZEN)
		return;
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		if (t->cl != k || !t->tell_by || W.now <= t->tell_by)
			continue;
		t->tell_by = 0;
		if (t->believes && !t->voided)
			cl->owed = true;
	}
}

/* After every step: a holder whose session the leader expired before its loss deadline
 * is told by that deadline (its loop is due then, and runs before time moves on). */
void ens_check(void)
{
	for (int j = 0; j < W.nct; j++) {
		struct contender *t = &W.ct[j];
		if (!t->tell_by)
			continue;
		if (!t->believes || t->voided) {
			t->tell_by = 0;
			continue;
		}
		if (W.now <= t->tell_by)
			continue;
		struct client *cl = &W.cl[t->cl];
		t->tell_by = 0;
		if (cl->life == L_CRASHED || clock_stood_still(sess_by_id(t->sess))) {
			W.exempt++;
			t->voided = true;
		} else if (cl->life == L_FROZEN) {
			cl->owed = true;
		} else {
			violation("contender %d (client %d) still believes it holds %s after its loss "
			          "deadline, its session expired by the leader: it was never told "
			          "\"lost\"", j, t->cl, W.paths[t->path].path);
		}
	}
}
