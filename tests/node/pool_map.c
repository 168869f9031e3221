// SPDX-License-Identifier: GPL-2.0
/*
 * pool_map NODE PAGES: map PAGES 2 MiB pages of NUMA node NODE's huge-page
 * pool from /dev/mltune as the calling user, touch them, and print what
 * hugepool/users charges to that user while they are mapped. For
 * tests/node/guest.sh, which runs it as a member of the mltune group and as
 * a stranger.
 *
 * Exit status: 0 mapped; 10 open() refused with EACCES; 11 mmap() refused
 * with EDQUOT (over the user quota); 1 any other failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/mltune.h>

static long charged(unsigned int uid)
{
	char line[128];
	unsigned int u;
	long pages, found = 0;
	FILE *f = fopen("/sys/kernel/mltune/hugepool/users", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%u %ld", &u, &pages) == 2 && u == uid)
			found = pages;
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	size_t len;
	char *p;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: pool_map NODE PAGES\n");
		return 2;
	}
	len = strtoul(argv[2], NULL, 10) * MLTUNE_HUGEPOOL_PAGE_SIZE;
	fd = open("/dev/mltune", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("pool_map: open /dev/mltune: %s (%s)\n", strerror(errno), strerrorname_np(errno));
		return errno == EACCES ? 10 : 1;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 MLTUNE_HUGEPOOL_MMAP_OFFSET(strtoul(argv[1], NULL, 10)));
	if (p == MAP_FAILED) {
		printf("pool_map: mmap %s pages of node %s: %s (%s)\n", argv[2], argv[1], strerror(errno),
		       strerrorname_np(errno));
		return errno == EDQUOT ? 11 : 1;
	}
	memset(p, 0x5a, len);
	printf("pool_map: uid %u mapped %s pages of node %s; hugepool/users charges it %ld pages\n", getuid(),
	       argv[2], argv[1], charged(getuid()));
	munmap(p, len);
	close(fd);
	return 0;
}
