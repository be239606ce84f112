/* zklocks: fair ZooKeeper lock recipes for C and C++. The one header to include. */
#ifndef ZKLOCKS_ZKLOCKS_H
#define ZKLOCKS_ZKLOCKS_H

#include <zklocks/version.h>
#include <zklocks/common.h>
#include <zklocks/errors.h>
#include <zklocks/client.h>
#include <zklocks/lock.h>
#include <zklocks/mutex.h>
#include <zklocks/semaphore_mutex.h>
#include <zklocks/rwlock.h>
#include <zklocks/semaphore.h>
#include <zklocks/multilock.h>
#include <zklocks/leader.h>
#include <zklocks/inspect.h>
#include <zklocks/record.h>
#include <zklocks/keep.h>

#endif
