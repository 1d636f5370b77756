/* tests/unit/launcher/discover/test_identity.c — this node's name and address. */
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "config/config.h"
#include "discover/identity.h"

static void test_identity(void)
{
    struct cfg c;
    struct identity id;
    char hn[128] = "";
    gethostname(hn, sizeof hn - 1);
    cfg_init(&c);
    identity_resolve(&id, &c);
    CHECK_EQ_STR(id.name, hn[0] ? hn : "localhost"); /* the host name by default */
    CHECK_EQ_STR(id.host, id.name);
    struct cfg_src src = {CFG_SRC_PODRUN, "PODRUN_NODE_NAME"};
    char err[256];
    CHECK_EQ_INT(cfg_set(&c, CFG_NODE_NAME, "worker-3", &src, err, sizeof err), 0);
    CHECK_EQ_INT(cfg_set(&c, CFG_LOCAL_ADDR, "10.1.2.3", &src, err, sizeof err), 0);
    identity_resolve(&id, &c);
    CHECK_EQ_STR(id.name, "worker-3");
    CHECK_EQ_STR(id.host, "10.1.2.3");
    cfg_free(&c);
}

int main(void)
{
    RUN(test_identity);
    return check_result();
}
