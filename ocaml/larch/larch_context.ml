(* Larch_context: larch as an Octez context backend, with the names and argument orders of
   Octez's context signature (src/lib_protocol_environment/environment_context_intf.ml), over the
   externals of Larch_raw. See larch_context.mli and docs/ocaml.md.

   Synchronous. Octez's context modules return Lwt promises; a backend module for Octez wraps
   each call as lib_context_tezedge does for TezEdge, e.g.

     let find ctxt key = Lwt.return (Larch_context.find ctxt.context (data_key key))
     let add {context; extra} key v =
       Lwt.return {context = Larch_context.add context (data_key key) v; extra}
     let commit ~time ?message ctxt =
       Lwt.return (Context_hash.of_bytes_exn
         (Larch_context.commit ~time:(Time.Protocol.to_seconds time) ?message ctxt.context))

   and runs the calls that release the runtime lock (commit, gc, export_snapshot, sync) through
   Lwt_preemptive.detach when the node should keep serving while they run. Errors are raised as
   [Larch_context.Error], which Lwt turns into a rejected promise. *)

exception Error of string


let ok = function Ok x -> x | Error e -> raise (Error e)

type index = Larch_raw.index

type t = Larch_raw.context

type context = t

type key = string list

type value = bytes

type tree = Larch_raw.tree

type hash = string

type depth = [`Eq of int | `Le of int | `Lt of int | `Ge of int | `Gt of int]

let init ?(readonly = false) ?(sync = "") dir =
  ok (Larch_raw.index_open dir readonly sync)

let close index = ok (Larch_raw.index_close index)

let index ctxt = Larch_raw.context_index ctxt

let empty index = ok (Larch_raw.context_init index)

let exists index hash = ok (Larch_raw.exists index hash)

let checkout index hash = ok (Larch_raw.checkout index hash)

let checkout_exn index hash =
  match checkout index hash with
  | Some ctxt -> ctxt
  | None -> raise (Error "larch: checkout: no such commit")

let head index = ok (Larch_raw.head index)

let mem ctxt key = ok (Larch_raw.mem ctxt key)

let mem_tree ctxt key = ok (Larch_raw.mem_tree ctxt key)

let find ctxt key = ok (Larch_raw.find ctxt key)

let find_tree ctxt key = ok (Larch_raw.find_tree ctxt key)

let list ctxt ?offset ?length key =
  Array.to_list (ok (Larch_raw.list ctxt offset length key))

let length ctxt key = ok (Larch_raw.length ctxt key)

let add ?(consume = false) ctxt key value =
  ok (Larch_raw.add ctxt key value consume)

let add_tree ?(consume = false) ctxt key tree =
  match key with
  | [] -> Larch_raw.set_tree ctxt tree
  | _ -> ok (Larch_raw.add_tree ctxt key tree consume)

let remove ?(consume = false) ctxt key =
  ok (Larch_raw.remove ctxt key consume)

let copy ?(consume = false) ctxt ~from ~to_ =
  ok (Larch_raw.copy ctxt from to_ consume)

let depth_arg : depth option -> (int * int) option = function
  | None -> None
  | Some (`Eq n) -> Some (0, n)
  | Some (`Le n) -> Some (1, n)
  | Some (`Lt n) -> Some (2, n)
  | Some (`Ge n) -> Some (3, n)
  | Some (`Gt n) -> Some (4, n)

let fold_tree ?depth tree key ~order ~init ~f =
  let sorted = match order with `Sorted -> true | `Undefined -> false in
  let walker = ok (Larch_raw.walker_make tree (depth_arg depth) key sorted) in
  let rec loop acc =
    match ok (Larch_raw.walker_next walker) with
    | None -> acc
    | Some (path, sub) -> loop (f (Array.to_list path) sub acc)
  in
  loop init

let get_tree ctxt = ok (Larch_raw.get_tree ctxt)

let fold ?depth ctxt key ~order ~init ~f =
  fold_tree ?depth (get_tree ctxt) key ~order ~init ~f

let hash ~time ?(author = "Tezos") ?(message = "") ?parents ctxt =
  Bytes.to_string (ok (Larch_raw.hash ctxt time author message parents))

let commit ~time ?(author = "Tezos") ?(message = "") ?parents ctxt =
  Bytes.to_string (ok (Larch_raw.commit ctxt time author message parents))

let gc index hash = ok (Larch_raw.gc index hash)

let sync index = ok (Larch_raw.sync index)

let export_snapshot index hash ~path =
  ok (Larch_raw.export_snapshot index hash path)

module Tree = struct
  let mem tree key = ok (Larch_raw.tree_mem tree key)

  let mem_tree tree key = ok (Larch_raw.tree_mem_tree tree key)

  let find tree key = ok (Larch_raw.tree_find tree key)

  let find_tree tree key = ok (Larch_raw.tree_find_tree tree key)

  let list tree ?offset ?length key =
    Array.to_list (ok (Larch_raw.tree_list tree offset length key))

  let length tree key = ok (Larch_raw.tree_length tree key)

  let add tree key value = ok (Larch_raw.tree_add tree key value)

  let add_tree tree key sub =
    match key with [] -> sub | _ -> ok (Larch_raw.tree_add_tree tree key sub)

  let remove tree key = ok (Larch_raw.tree_remove tree key)

  let fold = fold_tree

  let empty (_ : t) = Larch_raw.tree_empty ()

  let is_empty tree = ok (Larch_raw.tree_is_empty tree)

  let kind tree = if Larch_raw.tree_is_value tree then `Value else `Tree

  let to_value tree = ok (Larch_raw.tree_to_value tree)

  let of_value (_ : t) value = Larch_raw.tree_of_value value

  let hash tree = Bytes.to_string (ok (Larch_raw.tree_hash tree))

  let equal a b = ok (Larch_raw.tree_equal a b)
end

module Proof = struct
  type op =
    | Find of key
    | Mem of key
    | Mem_tree of key
    | Add of key * bytes
    | Remove of key

  type result = Value of bytes option | Bool of bool | Unit

  type encoding = V1 | V2 | V1_tree2 | V2_tree2

  type produced = {
    proof : bytes;
    before : hash;
    after : hash;
    results : result list;
  }

  let op_arg = function
    | Find k -> (0, Array.of_list k, "")
    | Mem k -> (1, Array.of_list k, "")
    | Mem_tree k -> (2, Array.of_list k, "")
    | Add (k, v) -> (3, Array.of_list k, Bytes.to_string v)
    | Remove k -> (4, Array.of_list k, "")

  let results ops raw =
    List.map2
      (fun op (value, flag) ->
        match op with
        | Find _ -> Value value
        | Mem _ | Mem_tree _ -> Bool flag
        | Add _ | Remove _ -> Unit)
      ops
      (Array.to_list raw)

  let encoding_code = function V1 -> 0 | V2 -> 1 | V1_tree2 -> 2 | V2_tree2 -> 3

  (* The tree and stream variants share their arguments and results. *)
  let produce_with raw ?(encoding = V2) tree ops =
    let proof, before, after, r =
      ok (raw tree (Array.of_list (List.map op_arg ops)) (encoding_code encoding))
    in
    {
      proof;
      before = Bytes.to_string before;
      after = Bytes.to_string after;
      results = results ops r;
    }

  let verify_with raw ?(encoding = V2) proof ops =
    let before, after, r =
      ok (raw (Bytes.to_string proof) (encoding_code encoding) (Array.of_list (List.map op_arg ops)))
    in
    (Bytes.to_string before, Bytes.to_string after, results ops r)

  let produce_tree_proof_of_tree ?encoding tree ops =
    produce_with Larch_raw.produce_tree_proof ?encoding tree ops

  let produce_tree_proof ?encoding index hash ops =
    produce_tree_proof_of_tree ?encoding (get_tree (checkout_exn index hash)) ops

  let verify_tree_proof ?encoding proof ops =
    verify_with Larch_raw.verify_tree_proof ?encoding proof ops

  let produce_stream_proof_of_tree ?encoding tree ops =
    produce_with Larch_raw.produce_stream_proof ?encoding tree ops

  let produce_stream_proof ?encoding index hash ops =
    produce_stream_proof_of_tree ?encoding (get_tree (checkout_exn index hash)) ops

  let verify_stream_proof ?encoding proof ops =
    verify_with Larch_raw.verify_stream_proof ?encoding proof ops

  type leaf_kind = Hole | Raw_context

  let merkle_tree_v2 ?(encoding = V2) ctxt leaf_kind key =
    ok
      (Larch_raw.merkle_tree_v2
         (get_tree ctxt)
         (match leaf_kind with Hole -> false | Raw_context -> true)
         (Array.of_list key)
         (encoding_code encoding))
end

let merkle_tree_v2 = Proof.merkle_tree_v2

let to_hex s =
  String.concat
    ""
    (List.init (String.length s) (fun i -> Printf.sprintf "%02x" (Char.code s.[i])))

let of_hex h =
  let n = String.length h in
  if n mod 2 <> 0 then raise (Error "larch: odd hex length") ;
  String.init (n / 2) (fun i ->
      match int_of_string_opt ("0x" ^ String.sub h (2 * i) 2) with
      | Some c -> Char.chr c
      | None -> raise (Error ("larch: not hex: " ^ h)))

let hash_to_b58 hash = ok (Larch_raw.hash_to_b58 hash)

let hash_of_text text = ok (Larch_raw.hash_of_text text)
