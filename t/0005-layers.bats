#!/usr/bin/env bats
# common/'s layers (common/layers), as t/check-layers holds them.
load lib-common

# tree FILE=TEXT...: a tree here with common/layers and the files given.
tree() {
	mkdir -p tree/common
	cp "$TOP/common/layers" tree/common/layers
	for a in "$@"; do
		mkdir -p "tree/$(dirname "${a%%=*}")"
		printf '%s\n' "${a#*=}" >"tree/${a%%=*}"
	done
}

# objects: compile tree/common/*/*.c into tree/build/common/*/*.o.
objects() {
	local c o
	for c in tree/common/*/*.c; do
		o=tree/build/${c#tree/}
		o=${o%.c}.o
		mkdir -p "$(dirname "$o")"
		cc -c -Itree/common -o "$o" "$c" || return 1
	done
}

@test "layers: every file of common/ keeps to its layer, by its includes and by its calls" {
	run "$TOP/t/check-layers" "$TOP" "$TOP/build"
	assert_success
	assert_output ''
}

@test "layers: an include of a layer above is refused with its file and line" {
	tree 'common/task/b.h=int b(void);' \
		'common/base/a.c=#include <stdio.h>
#include "task/b.h"
int a(void) { return b(); }'
	run "$TOP/t/check-layers" tree
	assert_failure 1
	assert_output 'common/base/a.c:2: base includes "task/b.h", of the layer task above it'
}

@test "layers: a common header included without its folder, or a file outside a layer folder, is refused" {
	tree 'common/base/b.h=int b(void);' 'common/base/a.c=#include "b.h"' 'common/c.c=int c;'
	run "$TOP/t/check-layers" tree
	assert_failure 1
	assert_line 'common/base/a.c:1: includes "b.h" without its folder ("base/b.h")'
	assert_line 'common/c.c: not in a layer folder (common/layers)'
}

@test "layers: a call into a layer above, declared by hand, is refused" {
	tree 'common/task/b.c=int b(void) { return 1; }' \
		'common/base/a.c=int b(void);
int a(void);
int a(void) { return b(); }'
	objects
	run "$TOP/t/check-layers" tree
	assert_success
	run "$TOP/t/check-layers" tree tree/build
	assert_failure 1
	assert_output 'common/base/a.c: base calls b() of common/task/b.c, in the layer task above it'
}

@test "layers: a circle of calls between files is refused, but not inside the proxy's loop" {
	tree 'common/task/a.c=int b(void); int a(void) { return b(); }' \
		'common/task/b.c=int a(void); int b(void) { return a(); }' \
		'common/proxy/c.c=int d(void); int c(void) { return d(); }' \
		'common/proxy/d.c=int c(void); int d(void) { return c(); }'
	objects
	run "$TOP/t/check-layers" tree tree/build
	assert_failure 1
	assert_line 'a circle of calls between these files:'
	assert_line '  common/task/a.c'
	assert_line '  common/task/b.c'
	refute_output --partial proxy
}

@test "layers: the table's folders are the only ones, and it is read whole" {
	tree 'common/ui/a.c=int a;'
	run "$TOP/t/check-layers" tree
	assert_failure 1
	assert_output "common/ui/a.c: folder 'ui' is not in common/layers"
	rm tree/common/layers
	run "$TOP/t/check-layers" tree
	assert_failure 2
	assert_output 'common/layers: missing'
}
