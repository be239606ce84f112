/* Stages: a recipe's machine that the loop runs (engine.h). A stage is a loop waiter of
 * the client's whose run is the recipe's step; the engine keeps the waiter, so that a
 * recipe names only its stage: to wake it, to be run by a time, to have a delete's answer
 * or a hold's proof wake it, and to tell the threads that wait on it. All on the loop but
 * zkl__stage_wait(). */
#include "engine.h"

static void stage_run(zkl_client *c, struct zkl_waiter *w)
{
	struct zkl_stage *s = (struct zkl_stage *)(void *)w;
	s->step(c, s);
}

void zkl__stage_start(zkl_client *c, struct zkl_stage *s,
                     void (*step)(zkl_client *c, struct zkl_stage *s))
{
	s->step = step;
	zkl__waiter_enter_loop(c, &s->w, NULL, stage_run);
}

void zkl__stage_stop(zkl_client *c, struct zkl_stage *s)
{
	zkl__waiter_leave(c, &s->w);
}

void zkl__stage_wake(zkl_client *c, struct zkl_stage *s)
{
	zkl__waiter_wake(c, &s->w);
}

void zkl__stage_wake_at(zkl_client *c, struct zkl_stage *s, int64_t t)
{
	zkl__waiter_wake_at(c, &s->w, t);
}

/* The jobs of zkl__stage_wait() are tagged with the stage's waiter, and woken as its
 * owner's. */
void zkl__stage_tell(zkl_client *c, struct zkl_stage *s)
{
	zkl__wake_owner(c, &s->w);
}

int zkl__stage_wait(zkl_client *c, struct zkl_stage *s, bool (*done)(zkl_client *c, void *arg),
                   void *arg, int64_t deadline, const char *what)
{
	return zkl__loop_wait(c, &s->w, done, arg, deadline, what);
}

bool zkl__stage_withdraw(zkl_client *c, struct zkl_stage *s, struct zkl_node *node,
                        struct zkl_withdrawal *wd)
{
	return zkl__withdraw_start(c, &s->w, node, INT64_MAX, wd);
}

bool zkl__stage_withdrawing(zkl_client *c, struct zkl_stage *s, const struct zkl_node *node,
                           struct zkl_withdrawal *wd)
{
	return zkl__withdraw_poll(c, &s->w, node, wd);
}

void zkl__engine_cancel(zkl_client *c, const void *owner)
{
	zkl__cancel_owner(c, owner);
}

void zkl__engine_run_job(zkl_client *c, struct zkl_job *j, const void *owner)
{
	zkl__job_begin(c, j, owner, NULL);
}
