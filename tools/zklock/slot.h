/* What a scheduled run does in its slot: the decision of `zklock --schedule`, from the
 * schedule, the run's arrival on the server's clock (its lock node's creation) and the
 * slot of the last success that the record beside the lock holds. Pure: no ZooKeeper, no
 * clock of its own (the unit tests hold it to its rules).
 *
 * The slot of a run is the latest schedule time at or before its arrival: hosts whose
 * cron lines fire seconds or minutes apart, or whose clocks disagree, arrive in the same
 * slot as long as they arrive before the next schedule time; one that arrives after it
 * belongs to the next slot. A slot whose success the record holds is done. Slots after
 * the recorded one and before this run's were missed (every host was down, or late past
 * the start deadline): with catch-up "once" this run stands for them too; with "skip"
 * they stay missed, and the run is for its own slot alone. A start deadline bounds how
 * late after its slot a run may still start (Kubernetes' startingDeadlineSeconds). */
#ifndef ZKLOCK_SLOT_H
#define ZKLOCK_SLOT_H

#include <stdbool.h>
#include <stdint.h>

#include "schedule.h"

enum catch_up {
	CATCH_UP_SKIP, /* missed slots stay missed (the default: a job that ran late once
	                * per missed night could pile the nights up on one host) */
	CATCH_UP_ONCE, /* one run stands for every missed slot */
};

enum slot_action {
	SLOT_RUN,  /* run the command for slot_ms (and, with catch-up once, the missed) */
	SLOT_DONE, /* the record holds this slot's success: skip (exit 0) */
	SLOT_LATE, /* arrived start_deadline or more after the slot began: do not start;
	            * the slot is missed too */
	SLOT_NONE, /* no schedule time at or before the arrival */
};

struct slot_plan {
	enum slot_action action;
	int64_t slot_ms;      /* this run's slot (0 with SLOT_NONE) */
	int64_t next_ms;      /* the slot after it (0 if none before 9999) */
	int64_t missed;       /* slots after the recorded one, before slot_ms: 0 without a
	                       * record (nothing ran before: nothing was missed) */
	bool missed_more;     /* the record is older than schedule_slots() counts back
	                       * (SCHEDULE_SEARCH_DAYS): at least missed */
	int64_t first_missed_ms; /* the earliest of them, 0 if none */
	int64_t covers_from_ms;  /* SLOT_RUN: the earliest slot the run stands for (slot_ms,
	                          * or with catch-up once the first missed) */
};

/* Whether s is "skip" or "once", into *out. */
bool slot_parse_catch_up(const char *s, enum catch_up *out);
const char *slot_catch_up_name(enum catch_up c);
const char *slot_action_name(enum slot_action a);

/* The plan of a run that arrived at arrival_ms (ms since the epoch, the server's clock)
 * on schedule s, when the record's last success was for the slot last_slot_ms (0: none),
 * with the policy and the start deadline (ms; 0: none). */
void slot_plan(const struct schedule *s, int64_t arrival_ms, int64_t last_slot_ms,
               enum catch_up policy, int64_t start_deadline_ms, struct slot_plan *out);

#endif
