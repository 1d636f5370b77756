/* tests/unit/launcher/devices/test_verbs_abi.c — podrun's copy of the libibverbs interface
 * (launcher/devices/verbs_abi.h) against rdma-core's own verbs.h, where the header is installed
 * (Debian: libibverbs-dev). A layout that drifted would make podrun read the wrong bytes of what
 * the library writes; this fails to compile instead. */
#include <infiniband/verbs.h>
#include <stddef.h>
#include <string.h>

#include "tests/unit/check.h"
#include "launcher/devices/verbs_abi.h"

#define SAME_FIELD(ours, theirs, field)                                                  \
    _Static_assert(offsetof(struct ours, field) == offsetof(struct theirs, field),       \
                   #field " of " #theirs);                                               \
    _Static_assert(sizeof(((struct ours *)0)->field) == sizeof(((struct theirs *)0)->field), \
                   #field " size of " #theirs)

/* The exported ibv_query_port fills struct _compat_ibv_port_attr: ibv_port_attr up to `flags`. */
SAME_FIELD(verbs_port_attr, ibv_port_attr, state);
SAME_FIELD(verbs_port_attr, ibv_port_attr, max_mtu);
SAME_FIELD(verbs_port_attr, ibv_port_attr, gid_tbl_len);
SAME_FIELD(verbs_port_attr, ibv_port_attr, lid);
SAME_FIELD(verbs_port_attr, ibv_port_attr, active_width);
SAME_FIELD(verbs_port_attr, ibv_port_attr, phys_state);
SAME_FIELD(verbs_port_attr, ibv_port_attr, link_layer);
SAME_FIELD(verbs_port_attr, ibv_port_attr, flags);
_Static_assert(sizeof(struct verbs_port_attr) <= sizeof(struct ibv_port_attr), "compat prefix");
_Static_assert(sizeof(struct verbs_port_attr) == offsetof(struct ibv_port_attr, port_cap_flags2),
               "the compat struct ends where port_cap_flags2 begins");

SAME_FIELD(verbs_device_attr, ibv_device_attr, fw_ver);
SAME_FIELD(verbs_device_attr, ibv_device_attr, max_qp);
SAME_FIELD(verbs_device_attr, ibv_device_attr, atomic_cap);
SAME_FIELD(verbs_device_attr, ibv_device_attr, max_pkeys);
SAME_FIELD(verbs_device_attr, ibv_device_attr, phys_port_cnt);
_Static_assert(sizeof(struct verbs_device_attr) == sizeof(struct ibv_device_attr), "device attr");

SAME_FIELD(verbs_gid_entry, ibv_gid_entry, gid);
SAME_FIELD(verbs_gid_entry, ibv_gid_entry, gid_index);
SAME_FIELD(verbs_gid_entry, ibv_gid_entry, port_num);
SAME_FIELD(verbs_gid_entry, ibv_gid_entry, gid_type);
SAME_FIELD(verbs_gid_entry, ibv_gid_entry, ndev_ifindex);
_Static_assert(sizeof(struct verbs_gid_entry) == sizeof(struct ibv_gid_entry), "gid entry");

static void test_values(void)
{
    CHECK_EQ_INT(VERBS_PORT_ACTIVE, IBV_PORT_ACTIVE);
    CHECK_EQ_INT(VERBS_PORT_DOWN, IBV_PORT_DOWN);
    CHECK_EQ_INT(VERBS_LINK_LAYER_INFINIBAND, IBV_LINK_LAYER_INFINIBAND);
    CHECK_EQ_INT(VERBS_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_ETHERNET);
    CHECK_EQ_INT(VERBS_GID_TYPE_ROCE_V2, IBV_GID_TYPE_ROCE_V2);
    CHECK_EQ_INT(VERBS_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V1);
}

/* The function types podrun calls through are the exported functions' own (compared as types,
 * so this test needs no libibverbs to link). */
#define SAME_TYPE(fn_type, fn) \
    _Static_assert(__builtin_types_compatible_p(fn_type, __typeof__(&fn)), #fn " prototype")
SAME_TYPE(verbs_open_device_fn, ibv_open_device);
SAME_TYPE(verbs_close_device_fn, ibv_close_device);
SAME_TYPE(verbs_get_device_name_fn, ibv_get_device_name);
SAME_TYPE(verbs_free_device_list_fn, ibv_free_device_list);

int main(void)
{
    RUN(test_values);
    return check_result();
}
