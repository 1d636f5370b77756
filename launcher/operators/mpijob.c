/* launcher/operators/mpijob.c — an MPIJob's hostfile (kubeflow mpi-operator v2beta1; reference/
 * k8s.md §4.2; Kubeflow Trainer v2's MPI runtime, resilience.md §4.1).
 *
 * The operator mounts the ConfigMap <job>-config at /etc/mpi in the launcher: /etc/mpi/hostfile
 * has one line per worker, "<job>-worker-<i>.<job>.<ns>.svc slots=<slotsPerWorker>" (OpenMPI) or
 * "...svc:<slots>" (Intel MPI, MPICH), the launcher first with runLauncherAsWorker; and it names
 * the file in OMPI_MCA_orte_default_hostfile (I_MPI_HYDRA_HOST_FILE, HYDRA_HOST_FILE). Every pod
 * carries K_MPI_JOB_ROLE=launcher|worker. Workers get the file only when the job mounts the same
 * ConfigMap into them too — which is what running podrun in every pod, with no sshd and no
 * launcher, takes.
 * Mapping: the hostfile source (hostsource.h), at the hostfile rank: node rank = this pod's line,
 * nnodes = the lines, master-addr = the first line's host (node rank 0 hosts the static store),
 * nproc-per-node = this line's slots. A launcher not in its own file is the usual mpirun layout:
 * the error says to run podrun in the workers instead. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/operators/adapter.h"
#include "launcher/operators/hostsource.h"
#include "rdzv/base/common.h"

#define MPI "MPIJob"
#define MPI_HOSTFILE "/etc/mpi/hostfile"

static const char *const path_vars[] = {"OMPI_MCA_orte_default_hostfile", "I_MPI_HYDRA_HOST_FILE",
                                        "HYDRA_HOST_FILE"};

/* The hostfile's path: the one a variable names (as given), else the operator's mount point under
 * the discovery root. *var is the variable, NULL for the mount point. */
static int hostfile_path(const struct op_ctx *x, char *path, size_t cap, const char **var)
{
    for (size_t i = 0; i < sizeof path_vars / sizeof *path_vars; i++) {
        const char *v = op_get(x, path_vars[i]);
        if (v) {
            *var = path_vars[i];
            snprintf(path, cap, "%s", v);
            return 0;
        }
    }
    *var = NULL;
    return op_path(x, MPI_HOSTFILE, path, cap);
}

static bool mounted(const struct op_ctx *x, const char *path)
{
    char *text = NULL;
    size_t len;
    if (!x->host || x->host->read_file(x->host, path, DISCOVER_FILE_MAX, &text, &len))
        return false;
    free(text);
    return true;
}

static bool mpijob_detect(const struct op_ctx *x, struct cfg_src *why)
{
    char path[OP_PATH_MAX];
    const char *var;
    if (hostfile_path(x, path, sizeof path, &var))
        return false;
    if (var) {   /* the launcher's variable names the file: reading it must then work */
        cfg_src_init(why, CFG_SRC_OPERATOR, "%s (%s)", var, MPI);
        return true;
    }
    /* a worker without the file is no discovery source; --discovery hostfile looks anyway */
    if ((!op_get(x, "K_MPI_JOB_ROLE") && !x->files_only) || !mounted(x, path))
        return false;
    cfg_src_init(why, CFG_SRC_HOSTFILE, "%s (%s)", path, MPI);
    return true;
}

static int mpijob_apply(struct cfg *c, const struct op_ctx *x, char *err, size_t errlen)
{
    char path[OP_PATH_MAX];
    const char *var, *role = op_get(x, "K_MPI_JOB_ROLE");
    char *text = NULL;
    size_t len = 0;
    int r = hostfile_path(x, path, sizeof path, &var);
    if (r)
        return podrun_failf(r, err, errlen, "the MPIJob hostfile's path is too long");
    r = x->host ? x->host->read_file(x->host, path, DISCOVER_FILE_MAX, &text, &len) : -ENOENT;
    if (r)
        return podrun_failf(r, err, errlen, "cannot read the MPIJob hostfile %s%s%s: %s; mount the "
                            "job's <job>-config ConfigMap at /etc/mpi", path,
                            var ? " named by " : "", var ? var : "", strerror(-r));
    struct hostfile hf;
    r = hostfile_parse(&hf, text, len, HOSTFILE_ANY, path, err, errlen);
    free(text);
    if (!r)
        r = hostsource_apply_parsed(c, x->host, &hf, NULL, MPI, NULL, err, errlen);
    hostfile_free(&hf);
    if (r == -ENOENT && role && !strcmp(role, "launcher")) {
        size_t n = err ? strlen(err) : 0;
        if (err && n < errlen)
            snprintf(err + n, errlen - n, " (an MPIJob's launcher is in its hostfile only with "
                     "runLauncherAsWorker: true; run podrun in the worker pods)");
    }
    return r;
}

const struct op_adapter op_mpijob = {MPI, OP_ENV | OP_FILES, mpijob_detect, mpijob_apply};
