/* `zklock status PATH`: every node queued at PATH; `zklock list PREFIX`: the locks in
 * use under PREFIX. */
#include "zklock.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int run_status(const struct opts *o)
{
	zkl_client *c = NULL;
	int status = open_client(o, &c);
	if (status != 0)
		return status;
	struct queue_view v;
	int rc = view_collect(c, o->path, &v);
	if (rc == 0) {
		if (o->json) {
			print_view_json(stdout, o->path, &v);
			fputc('\n', stdout);
		} else {
			print_view_text(stdout, o->path, &v);
		}
		view_free(&v);
		if (fflush(stdout) != 0) {
			msg("writing the queue: %s", strerror(errno));
			status = EXIT_SOFTWARE;
		}
	} else {
		status = report_failure("listing", o->path, rc);
	}
	zkl_client_close(c);
	return status;
}

/* Collects, under prefix, every folder with lock nodes (a semaphore's leases/ and locks/
 * count for the semaphore). Breadth first, at most `budget` folders looked at. */
static int walk(struct raw *r, const char *prefix, char ***out, size_t *nout)
{
	size_t cap = 64, head = 0, tail = 0, budget = 20000;
	char **todo = malloc(cap * sizeof *todo);
	*out = NULL;
	*nout = 0;
	if (!todo || !(todo[tail++] = strdup(prefix))) {
		free(todo);
		return EXIT_SOFTWARE;
	}
	int status = 0;
	while (head < tail && budget-- > 0) {
		char *dir = todo[head++];
		struct String_vector sv = { 0, NULL };
		int zrc = zoo_get_children(r->zh, dir, 0, &sv);
		if (zrc == ZNONODE || zrc == ZNOAUTH) {
			free(dir);
			continue;
		}
		if (zrc != ZOK) {
			msg("cannot list %s: %s", dir, zerror(zrc));
			free(dir);
			status = EXIT_SOFTWARE;
			break;
		}
		bool locks = false;
		for (int i = 0; i < sv.count; i++)
			if (kind_of(sv.data[i]) >= 0)
				locks = true;
		if (locks) {
			/* A semaphore's parts stand for the semaphore. */
			const char *base = strrchr(dir, '/');
			base = base ? base + 1 : dir;
			char *lock = strdup(dir);
			if (lock && (strcmp(base, "leases") == 0 || strcmp(base, "locks") == 0)) {
				char *slash = strrchr(lock, '/');
				if (slash && slash != lock)
					*slash = '\0';
			}
			bool dup = false;
			for (size_t i = 0; lock && i < *nout; i++)
				dup = dup || strcmp((*out)[i], lock) == 0;
			if (lock && !dup) {
				char **grown = realloc(*out, (*nout + 1) * sizeof *grown);
				if (grown) {
					*out = grown;
					(*out)[(*nout)++] = lock;
					lock = NULL;
				}
			}
			free(lock);
		}
		for (int i = 0; i < sv.count; i++) {
			if (kind_of(sv.data[i]) >= 0)
				continue; /* a lock node, not a folder */
			if (strcmp(dir, "/") == 0 && strcmp(sv.data[i], "zookeeper") == 0)
				continue;
			size_t n = strlen(dir) + strlen(sv.data[i]) + 2;
			char *child = malloc(n);
			if (!child)
				continue;
			snprintf(child, n, "%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", sv.data[i]);
			if (tail == cap) {
				char **grown = realloc(todo, cap * 2 * sizeof *grown);
				if (!grown) {
					free(child);
					continue;
				}
				todo = grown;
				cap *= 2;
			}
			todo[tail++] = child;
		}
		deallocate_String_vector(&sv);
		free(dir);
	}
	while (head < tail)
		free(todo[head++]);
	free(todo);
	return status;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int run_list(const struct opts *o)
{
	struct raw r;
	int status = raw_open(o, &r);
	if (status != 0)
		return status;
	char **paths;
	size_t n;
	status = walk(&r, o->path, &paths, &n);
	raw_close(&r);
	if (status != 0)
		return status;
	qsort(paths, n, sizeof *paths, cmp_str);
	zkl_client *c = NULL;
	if (n > 0 && (status = open_client(o, &c)) != 0)
		n = 0;
	if (o->json) {
		fputs("{\"prefix\": ", stdout);
		print_json_cstr(stdout, o->path);
		fputs(", \"locks\": [", stdout);
	}
	size_t shown = 0;
	for (size_t i = 0; i < n; i++) {
		struct queue_view v;
		int rc = view_collect(c, paths[i], &v);
		if (rc != 0) {
			status = report_failure("listing", paths[i], rc);
			continue;
		}
		if (v.n == 0) {
			view_free(&v);
			continue;
		}
		if (o->json) {
			fputs(shown ? ", " : "", stdout);
			print_view_json(stdout, paths[i], &v);
		} else {
			/* The layouts present, the first holder. */
			char layouts[128] = "";
			const struct qnode *first = NULL;
			for (size_t k = 0; k < v.n; k++) {
				const char *l = v.nodes[k].layout;
				if (!strstr(layouts, l) && strlen(layouts) + strlen(l) + 2 < sizeof layouts) {
					if (*layouts)
						strcat(layouts, ",");
					strcat(layouts, l);
				}
				if (!first && v.nodes[k].p.holder)
					first = &v.nodes[k];
			}
			printf("%s\t%s\t%zu\t%zu\t", paths[i], layouts, v.holders, v.waiting);
			if (first)
				print_printable(stdout, first->p.data, (size_t)first->p.data_len);
			else
				fputc('-', stdout);
			fputc('\n', stdout);
		}
		shown++;
		view_free(&v);
	}
	if (o->json)
		fputs("]}\n", stdout);
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	zkl_client_close(c);
	if (fflush(stdout) != 0) {
		msg("writing the list: %s", strerror(errno));
		status = EXIT_SOFTWARE;
	}
	return status;
}

