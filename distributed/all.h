// The distributed floor in one include (and everything below it): stores and rendezvous, process
// groups (Gloo; NCCL in CUDA builds), the launcher, DistributedDataParallel and
// FullyShardedDataParallel.
#pragma once

#include "models/all.h"

#include "distributed/coalesce.h"
#include "distributed/dist_env.h"
#include "distributed/ddp.h"
#include "distributed/file_store.h"
#include "distributed/fsdp.h"
#include "distributed/gloo_process_group.h"
#include "distributed/launcher.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"
#include "distributed/sampler.h"
#include "distributed/sharded_layout.h"
#include "distributed/store.h"
#include "distributed/tcp_store.h"
