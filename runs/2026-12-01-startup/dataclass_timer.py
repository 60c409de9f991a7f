import time, sys
t0=time.perf_counter()
import dataclasses, enum
tot=[0.0]; n=[0]
orig=dataclasses._process_class
def wrap(*a, **k):
    t=time.perf_counter(); r=orig(*a, **k); tot[0]+=time.perf_counter()-t; n[0]+=1; return r
dataclasses._process_class=wrap
et=[0.0]; en=[0]
origE=enum.EnumType.__new__
def ewrap(*a, **k):
    t=time.perf_counter(); r=origE(*a, **k); et[0]+=time.perf_counter()-t; en[0]+=1; return r
enum.EnumType.__new__=ewrap
t1=time.perf_counter()
import ptxgen.cli
from ptxgen.derive.explain import explain_text
from ptxgen.derive.layout import derive
t2=time.perf_counter()
print(f"imports {t2-t1:.4f}s; dataclasses {n[0]} in {tot[0]:.4f}s; enums {en[0]} in {et[0]:.4f}s")
