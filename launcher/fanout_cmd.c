/* launcher/fanout_cmd.c — the deepspeed head's pdsh/ssh command lines (pure; see
 * fanout_cmd.h). */
#include "launcher/fanout_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv/base/text.h"

/* ---- growing text (rdzv/base/text.h) ---- */

static void add(textbuf_t *b, const char *s)
{
    text_add(b, s, strlen(s));
}

/* Takes back the last k bytes (a separator the next piece replaces); a cut text is left alone. */
static void unadd(textbuf_t *b, size_t k)
{
    if (b->cut || b->len < k)
        return;
    b->len -= k;
    b->need -= k;
    b->s[b->len] = '\0';
}

/* The text into *out, or -ENOMEM when it was cut (out of memory or over TEXT_GROW_MAX). */
static int done(textbuf_t *b, char **out)
{
    if (b->cut || !b->s) {
        text_free(b);
        return -ENOMEM;
    }
    *out = b->s;
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
static void shell_word(textbuf_t *b, const char *w, bool keep_percent)
{
    text_add(b, "'", 1);
    for (; *w; w++) {
        if (*w == '\'')
            add(b, "'\\''");
        else if (*w == '%' && !keep_percent)
            add(b, "%%");
        else
            text_add(b, w, 1);
    }
    text_add(b, "' ", 2);
}

int fanout_cmd_start(const struct fanout_cmd_agent *r, char **out)
{
    textbuf_t b = {0};
    char t[512];
    if (r->venv_script) {
        /* '.', not bash's 'source', which sh lacks; a script that fails stops the host's
         * agent (and so the job) rather than running it outside the environment. A relative
         * name is the head's, in the directory the host works in (the cd below comes after):
         * '.' looks up a name without a slash in PATH only. */
        textbuf_t path = {0};
        if (r->venv_script[0] != '/') {
            add(&path, r->cwd);
            add(&path, strcmp(r->cwd, "/") ? "/" : "");
        }
        add(&path, r->venv_script);
        if (path.cut || !path.s) {
            text_free(&path);
            text_free(&b);
            return -ENOMEM;
        }
        add(&b, ". ");
        shell_word(&b, path.s, false);
        text_free(&path);
        unadd(&b, 1);   /* the separator comes next */
        add(&b, " || exit 2; ");
    }
    for (int i = 0; i < r->nexports; i++) {
        const char *eq = strchr(r->exports[i], '=');
        if (!eq)
            continue;
        add(&b, "export ");
        text_add(&b, r->exports[i], (size_t)(eq - r->exports[i]));
        text_add(&b, "=", 1);
        shell_word(&b, eq + 1, false);
        unadd(&b, 1);
        add(&b, "; ");
    }
    add(&b, "cd ");
    shell_word(&b, r->cwd, false);
    unadd(&b, 1);
    add(&b, " && exec ");
    shell_word(&b, r->podrun, false);
    add(&b, "deepspeed ");
    snprintf(t, sizeof t, "--world_info=%s", r->world_info);
    shell_word(&b, t, false);
    add(&b, "--node_rank=%n ");
    snprintf(t, sizeof t, "--master_addr=%s", r->master_addr);
    shell_word(&b, t, false);
    snprintf(t, sizeof t, "--master_port=%d", r->master_port);
    shell_word(&b, t, false);
    snprintf(t, sizeof t, "--rdzv-id=%s", r->run_id);
    shell_word(&b, t, false);
    snprintf(t, sizeof t, "--pid-file=%s/podrun-%s-", r->pid_dir, r->run_id);
    shell_word(&b, t, false);
    unadd(&b, 2);   /* the node rank outside the quotes: '...-'%n.pid */
    add(&b, "'%n.pid ");
    if (r->addr_is_host)
        add(&b, "--local-addr=%h ");
    if (r->name_is_host)
        add(&b, "--node-name=%h ");
    for (int i = 0; i < r->noptions; i++)
        shell_word(&b, r->options[i], false);
    add(&b, "-- ");
    for (int i = 0; i < r->program_argc; i++)
        shell_word(&b, r->program[i], false);
    if (b.len && b.s[b.len - 1] == ' ')
        unadd(&b, 1);
    return done(&b, out);
}

int fanout_cmd_stop(const struct fanout_cmd_agent *r, char **out)
{
    textbuf_t b = {0};
    char t[512];
    snprintf(t, sizeof t, "%s/podrun-%s-", r->pid_dir, r->run_id);
    add(&b, "f=");
    shell_word(&b, t, false);
    unadd(&b, 2);
    /* the file goes with the signal: a repeated stop must not make it a second SIGTERM, which
     * an agent takes as "kill the workers now" */
    add(&b, "'%n.pid; if [ -f \"$f\" ]; then kill -TERM \"$(cat \"$f\")\"; rm -f \"$f\"; fi "
               "2>/dev/null; exit 0");
    return done(&b, out);
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
    textbuf_t b = {0};
    char num[16];
    snprintf(num, sizeof num, "%d", node_rank);
    for (const char *p = command; *p; p++) {
        if (*p == '%' && p[1] == 'n')
            add(&b, num), p++;
        else if (*p == '%' && p[1] == 'h')
            add(&b, host), p++;
        else if (*p == '%' && p[1] == '%')
            text_add(&b, "%", 1), p++;
        else
            text_add(&b, p, 1);
    }
    text_add(&b, "", 0);
    return done(&b, out);
}
