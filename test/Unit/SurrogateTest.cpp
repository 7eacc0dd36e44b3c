#include "gtest/gtest.h"
TEST(Build, Placeholder) {}
