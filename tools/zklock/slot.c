/* The decision of a scheduled run in its slot (slot.h). */
#include "slot.h"

#include <string.h>

bool slot_parse_catch_up(const char *s, enum catch_up *out)
{
	if (strcmp(s, "skip") == 0)
		*out = CATCH_UP_SKIP;
	else if (strcmp(s, "once") == 0)
		*out = CATCH_UP_ONCE;
	else
		return false;
	return true;
}

const char *slot_catch_up_name(enum catch_up c)
{
	return c == CATCH_UP_ONCE ? "once" : "skip";
}

const char *slot_action_name(enum slot_action a)
{
	switch (a) {
	case SLOT_RUN: return "run";
	case SLOT_DONE: return "done";
	case SLOT_LATE: return "late";
	case SLOT_NONE: return "none";
	}
	return "unknown";
}

/* ms since the epoch to the seconds the schedule takes (floor; never negative). */
static int64_t secs(int64_t ms)
{
	return ms <= 0 ? 0 : ms / 1000;
}

void slot_plan(const struct schedule *s, int64_t arrival_ms, int64_t last_slot_ms,
               enum catch_up policy, int64_t start_deadline_ms, struct slot_plan *out)
{
	memset(out, 0, sizeof *out);
	int64_t slot, next;
	if (arrival_ms < 0 || !schedule_prev(s, secs(arrival_ms), &slot)) {
		out->action = SLOT_NONE;
		return;
	}
	out->slot_ms = slot * 1000;
	if (schedule_next(s, slot, &next))
		out->next_ms = next * 1000;
	if (last_slot_ms > 0 && last_slot_ms >= out->slot_ms) {
		out->action = SLOT_DONE;
		return;
	}
	if (last_slot_ms > 0) {
		/* The slots in (last, slot): those in (last, slot] but slot itself. */
		int64_t from = secs(last_slot_ms), first;
		int64_t n = schedule_slots(s, from, slot, NULL, 0);
		if (n < 0) {
			n = schedule_slots(s, slot - (int64_t)SCHEDULE_SEARCH_DAYS * 86400, slot, NULL,
			                   0);
			out->missed_more = true;
		}
		out->missed = n > 0 ? n - 1 : 0;
		if (out->missed > 0 && schedule_next(s, from, &first) && first < slot)
			out->first_missed_ms = first * 1000;
	}
	if (start_deadline_ms > 0 && arrival_ms - out->slot_ms >= start_deadline_ms) {
		out->action = SLOT_LATE;
		return;
	}
	out->action = SLOT_RUN;
	out->covers_from_ms = policy == CATCH_UP_ONCE && out->first_missed_ms > 0
	                              ? out->first_missed_ms
	                              : out->slot_ms;
}
