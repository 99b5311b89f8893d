// The fabric floor in one include (and everything below it): the Fabric facade.
#pragma once

#include "distributed/all.h"

#include "fabric/fabric.h"
