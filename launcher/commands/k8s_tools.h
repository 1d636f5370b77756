/* launcher/commands/k8s_tools.h — the output of `podrun k8s` (launcher/commands/k8s.c):
 * PaddleCloud's docker/k8s_tools.py stdout, byte for byte, from a pod table (launcher/discover/k8s_pods.h).
 * Pure: no I/O; the command lists and watches the pods and prints what these write. */
#ifndef PODRUN_COMMANDS_K8S_TOOLS_H
#define PODRUN_COMMANDS_K8S_TOOLS_H

#include <stddef.h>

#include "launcher/discover/k8s_pods.h"

/* Each writes the whole stdout of the command, newline included, into buf and returns its
 * length, or -ENOSPC. Pods are those of the table (the caller lists by the selector). */

/* fetch_ips SEL: IPs of the pods whose status is Running, string-sorted, joined by ",".
 * fetch_ips_string SEL PHASE is the same with another phase. -ENODATA when a pod counted has
 * no IP (k8s_tools.py fails there). */
int k8s_tools_fetch_ips(const struct k8s_pods *t, const char *phase, char *buf, size_t cap);
/* fetch_endpoints SEL PORT: "ip:PORT" items, PORT as given (not parsed), in that order. */
int k8s_tools_fetch_endpoints(const struct k8s_pods *t, const char *port, char *buf,
                              size_t cap);
/* fetch_id SEL: the index of local_ip among the Running pods' sorted IPs, or "None". */
int k8s_tools_fetch_id(const struct k8s_pods *t, const char *local_ip, char *buf, size_t cap);
/* count_pods_by_phase SEL PHASE */
int k8s_tools_count_pods_by_phase(const struct k8s_pods *t, const char *phase, char *buf,
                                  size_t cap);
/* containers_all_ready: 1 when every pod's containers are all ready (a pod without container
 * statuses is not), else 0. */
int k8s_tools_containers_all_ready(const struct k8s_pods *t);
/* wait_pods_running SEL N: the line printed first, and the one printed while count < N. */
int k8s_tools_wait_running_header(const char *selector, const char *desired, char *buf,
                                  size_t cap);
int k8s_tools_wait_running_progress(size_t count, char *buf, size_t cap);
/* wait_containers_ready SEL: the first line, and the one printed while not all are ready. */
int k8s_tools_wait_ready_header(const char *selector, char *buf, size_t cap);
int k8s_tools_wait_ready_progress(char *buf, size_t cap);

#endif
