/* launcher/fanout_cmd.c — the deepspeed head's pdsh/ssh command lines (pure; see
 * fanout_cmd.h). */
#include "launcher/fanout_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- a growing string ---- */

struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static int sb_done(struct sbuf *b, char **out)
{
    if (b->oom || !b->p) {
        free(b->p);
        return -ENOMEM;
    }
    *out = b->p;
    return 0;
}

/* ---- the command lines ---- */

bool fanout_cmd_rcmd_is_exec(char *const *launcher_words, const char *pdsh_rcmd_type)
{
    const char *type = pdsh_rcmd_type;
    for (int i = 0; launcher_words && launcher_words[i]; i++) {
        if (!strcmp(launcher_words[i], "-R") && launcher_words[i + 1])
            type = launcher_words[++i];
        else if (!strncmp(launcher_words[i], "-R", 2) && launcher_words[i][2])
            type = launcher_words[i] + 2;
    }
    return type && !strcmp(type, "exec");
}

/* One word and a space for the remote shell: single-quoted, '%' doubled for pdsh unless
 * keep_percent. */
static void shell_word(struct sbuf *b, const char *w, bool keep_percent)
{
    sb_add(b, "'", 1);
    for (; *w; w++) {
        if (*w == '\'')
            sb_str(b, "'\\''");
        else if (*w == '%' && !keep_percent)
            sb_str(b, "%%");
        else
            sb_add(b, w, 1);
    }
    sb_add(b, "' ", 2);
}

int fanout_cmd_start(const struct fanout_cmd_agent *r, char **out)
{
    struct sbuf b = {0};
    char t[512];
    if (r->venv_script) {
        /* '.', not bash's 'source', which sh lacks; a script that fails stops the host's
         * agent (and so the job) rather than running it outside the environment */
        sb_str(&b, ". ");
        shell_word(&b, r->venv_script, false);
        b.n--;   /* the separator comes next */
        sb_str(&b, " || exit 2; ");
    }
    for (int i = 0; i < r->nexports; i++) {
        const char *eq = strchr(r->exports[i], '=');
        if (!eq)
            continue;
        sb_str(&b, "export ");
        sb_add(&b, r->exports[i], (size_t)(eq - r->exports[i]));
        sb_add(&b, "=", 1);
        shell_word(&b, eq + 1, false);
        b.n--;
        sb_str(&b, "; ");
    }
    sb_str(&b, "cd ");
    shell_word(&b, r->cwd, false);
    b.n--;
    sb_str(&b, " && exec ");
    shell_word(&b, r->podrun, false);
    sb_str(&b, "deepspeed ");
    snprintf(t, sizeof t, "--world_info=%s", r->world_info);
    shell_word(&b, t, false);
    sb_str(&b, "--node_rank=%n ");
    snprintf(t, sizeof t, "--master_addr=%s", r->master_addr);
    shell_word(&b, t, false);
    snprintf(t, sizeof t, "--master_port=%d", r->master_port);
    shell_word(&b, t, false);
    snprintf(t, sizeof t, "--rdzv-id=%s", r->run_id);
    shell_word(&b, t, false);
    snprintf(t, sizeof t, "--pid-file=%s/podrun-%s-", r->pid_dir, r->run_id);
    shell_word(&b, t, false);
    b.n -= 2;   /* the node rank outside the quotes: '...-'%n.pid */
    sb_str(&b, "'%n.pid ");
    if (r->addr_is_host)
        sb_str(&b, "--local-addr=%h ");
    if (r->name_is_host)
        sb_str(&b, "--node-name=%h ");
    for (int i = 0; i < r->noptions; i++)
        shell_word(&b, r->options[i], false);
    sb_str(&b, "-- ");
    for (int i = 0; i < r->program_argc; i++)
        shell_word(&b, r->program[i], false);
    if (b.n && b.p[b.n - 1] == ' ')
        b.p[--b.n] = '\0';
    return sb_done(&b, out);
}

int fanout_cmd_stop(const struct fanout_cmd_agent *r, char **out)
{
    struct sbuf b = {0};
    char t[512];
    snprintf(t, sizeof t, "%s/podrun-%s-", r->pid_dir, r->run_id);
    sb_str(&b, "f=");
    shell_word(&b, t, false);
    b.n -= 2;
    /* the file goes with the signal: a repeated stop must not make it a second SIGTERM, which
     * an agent takes as "kill the workers now" */
    sb_str(&b, "'%n.pid; if [ -f \"$f\" ]; then kill -TERM \"$(cat \"$f\")\"; rm -f \"$f\"; fi "
               "2>/dev/null; exit 0");
    return sb_done(&b, out);
}

int fanout_cmd_pdsh_argv(const char *hosts, int fanout, char *const *launcher_words, bool exec,
                 const char *command, char *fanout_buf, char ***out)
{
    static char pdsh[] = "pdsh", dash_s[] = "-S", dash_f[] = "-f", dash_w[] = "-w", sh[] = "sh",
                dash_c[] = "-c";
    int nw = 0;
    while (launcher_words && launcher_words[nw])
        nw++;
    char **a = malloc(((size_t)nw + 12) * sizeof(char *));
    if (!a)
        return -ENOMEM;
    snprintf(fanout_buf, 16, "%d", fanout);
    int k = 0;
    a[k++] = pdsh;
    a[k++] = dash_s;
    a[k++] = dash_f;
    a[k++] = fanout_buf;
    a[k++] = dash_w;
    a[k++] = (char *)hosts;
    for (int i = 0; i < nw; i++)
        a[k++] = launcher_words[i];
    if (exec) {
        a[k++] = sh;
        a[k++] = dash_c;
    }
    a[k++] = (char *)command;
    a[k] = NULL;
    *out = a;
    return 0;
}

int fanout_cmd_expand_host(const char *command, const char *host, int node_rank, char **out)
{
    struct sbuf b = {0};
    char num[16];
    snprintf(num, sizeof num, "%d", node_rank);
    for (const char *p = command; *p; p++) {
        if (*p == '%' && p[1] == 'n')
            sb_str(&b, num), p++;
        else if (*p == '%' && p[1] == 'h')
            sb_str(&b, host), p++;
        else if (*p == '%' && p[1] == '%')
            sb_add(&b, "%", 1), p++;
        else
            sb_add(&b, p, 1);
    }
    sb_add(&b, "", 0);
    return sb_done(&b, out);
}
